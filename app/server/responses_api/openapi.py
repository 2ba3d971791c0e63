"""The OpenAPI description of /v1/responses and /v1/responses/{id} (app/server/openapi.py
puts these paths in its document): the request as request.py validates it, the response
object, each stream event and the errors in OpenAI's shape. What JSON Schema cannot say is
in the descriptions: tool names are distinct, a named tool_choice names one of `tools`,
previous_response_id names a stored response."""

from __future__ import annotations

from typing import Any

from ..openapi import (
    CHAT_REQUEST,
    ERROR,
    ERROR_STATUSES,
    INT,
    JSON_OBJECT_TEXT,
    JSON_SCHEMA,
    OVERFLOW,
    SHARED,
    STR,
    _integer,
    _json,
    _obj,
    nullable,
)
from .request import FORMATS, ROLES, TEXT_PARTS

CHAT_FIELDS = CHAT_REQUEST["properties"]
TEXT_PART = {"type": "object", "required": ["type", "text"], "properties": {
    "type": {"enum": list(TEXT_PARTS)}, "text": STR}}
MESSAGE_IN = {"type": "object", "required": ["role", "content"], "properties": {
    "type": {"const": "message"}, "role": {"enum": list(ROLES)},
    "content": {"anyOf": [STR, {"type": "array", "items": TEXT_PART}]}},
    "description": "a user's input_image parts (base64 data URLs) are read for a model that "
                   "sees images; for a text-only model, and input_file and other parts, a "
                   "400 naming the part"}
CALL_IN = {"type": "object", "required": ["type", "call_id", "name", "arguments"],
           "properties": {"type": {"const": "function_call"},
                          "call_id": {"type": "string", "minLength": 1},
                          "name": {"type": "string", "minLength": 1},
                          "arguments": JSON_OBJECT_TEXT}}
OUTPUT_IN = {"type": "object", "required": ["type", "call_id", "output"], "properties": {
    "type": {"const": "function_call_output"}, "call_id": {"type": "string", "minLength": 1},
    "output": {"anyOf": [STR, {"type": "array", "items": TEXT_PART}]}}}
REASONING_TEXTS = nullable({"type": "array", "items": {
    "type": "object", "required": ["text"], "properties": {"text": STR}}})
REASONING_IN = {"type": "object", "required": ["type"], "properties": {
    "type": {"const": "reasoning"}, "content": REASONING_TEXTS, "summary": REASONING_TEXTS},
    "description": "earlier reasoning, handed to the next assistant message's template"}
ITEM_IN = {"anyOf": [MESSAGE_IN, CALL_IN, OUTPUT_IN, REASONING_IN],
           "description": "other item types (web_search_call, computer_call, ...) are "
                          "refused (400 naming them)"}
TOOL = {"type": "object", "required": ["type", "name"], "properties": {
    "type": {"const": "function"},
    "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
    "description": nullable(STR),
    "parameters": nullable({**JSON_SCHEMA, "properties": {"type": {"const": "object"}}}),
    "strict": nullable({"type": "boolean"})},
    "description": "function tools only: hosted tools (web_search, file_search, computer "
                   "use, code_interpreter, mcp, ...) are refused (400 naming them)"}
FORMAT = {"anyOf": [
    {"type": "object", "required": ["type"],
     "properties": {"type": {"enum": [f for f in FORMATS if f != "json_schema"]}}},
    {"type": "object", "required": ["type", "schema"], "properties": {
        "type": {"const": "json_schema"}, "name": nullable(STR),
        "description": nullable(STR), "schema": JSON_SCHEMA,
        "strict": nullable({"type": "boolean"})}}]}
REQUEST = {
    "type": "object", "required": ["model", "input"],
    "description": "OpenAI's Responses API. Unknown fields are ignored.",
    "properties": {
        "model": SHARED["model"],
        "input": {"anyOf": [STR, {"type": "array", "minItems": 1, "items": ITEM_IN}]},
        "instructions": nullable(STR),
        "max_output_tokens": _integer(minimum=1),
        "temperature": SHARED["temperature"], "top_p": SHARED["top_p"],
        "stream": SHARED["stream"],
        "tools": nullable({"type": "array", "items": TOOL, "maxItems": 128,
                           "description": "distinct names"}),
        "tool_choice": nullable({"anyOf": [
            {"enum": ["auto", "none", "required"]},
            {"type": "object", "required": ["type", "name"], "properties": {
                "type": {"const": "function"}, "name": STR}}],
            "description": "auto and required need `tools`; a named function must be one "
                           "of them"}),
        "parallel_tool_calls": nullable({"type": "boolean"}),
        "text": nullable({"type": "object", "properties": {"format": nullable(FORMAT)}}),
        "reasoning": nullable({"type": "object", "properties": {"effort": nullable({
            "enum": ["none", "minimal", "low", "medium", "high"]})}}),
        "store": nullable({"type": "boolean", "description": "default true: kept for "
                                                              "previous_response_id"}),
        "previous_response_id": nullable({
            "type": "string", "minLength": 1,
            "description": "a stored response's id: its input and output come first"}),
        "thinking_token_budget": CHAT_FIELDS["thinking_token_budget"],
        "background": nullable({"const": False}),
        "conversation": {"type": "null", "description": "not supported (refused): send the "
                                                        "input, or previous_response_id"},
        "prompt": {"type": "null", "description": "not supported (refused): prompt "
                                                  "templates are OpenAI's"},
        "truncation": nullable({"enum": ["auto", "disabled"], "description": (
            "auto: as context_overflow truncate_middle; disabled: as stop; context_overflow "
            "wins when both are given")}),
        **OVERFLOW,
    },
    "allOf": [  # JSON output and a forced tool call exclude each other
        {"if": {"required": ["text"], "properties": {"text": {
            "type": "object", "required": ["format"], "properties": {"format": {
                "type": "object", "required": ["type"],
                "properties": {"type": {"enum": ["json_object", "json_schema"]}}}}}}},
         "then": {"properties": {"tool_choice": {
             "not": {"anyOf": [{"const": "required"}, {"type": "object"}]}}}}}],
}

# -- what the server sends ------------------------------------------------------------------
ITEM_OUT = {"type": "object", "required": ["type", "id"], "properties": {
    "type": {"enum": ["message", "function_call", "reasoning"]}, "id": STR}}
USAGE = _obj({"input_tokens": INT,
              # dropped_*: what the context overflow policy left out, when it did
              "input_tokens_details": _obj({"cached_tokens": INT})
              | {"properties": {"cached_tokens": INT, "dropped_tokens": INT,
                                "dropped_messages": INT}},
              "output_tokens": INT,
              "output_tokens_details": _obj({"reasoning_tokens": INT}),
              "total_tokens": INT})
RESPONSE = {"type": "object",
            "required": ["id", "object", "created_at", "status", "model", "output"],
            "properties": {"id": STR, "object": {"const": "response"}, "created_at": INT,
                           "status": {"enum": ["completed", "incomplete", "in_progress",
                                               "failed"]},
                           "model": STR, "output": {"type": "array", "items": ITEM_OUT},
                           "usage": nullable(USAGE)}}
DELETED = _obj({"id": STR, "object": {"const": "response"}, "deleted": {"const": True}})
EVENT_TYPES = [
    "response.created", "response.in_progress", "response.output_item.added",
    "response.content_part.added", "response.output_text.delta",
    "response.output_text.done", "response.content_part.done",
    "response.reasoning_text.delta", "response.reasoning_text.done",
    "response.function_call_arguments.delta", "response.function_call_arguments.done",
    "response.output_item.done", "response.completed", "response.incomplete",
    "response.failed", "error"]
EVENT = {"type": "object", "required": ["type", "sequence_number"], "properties": {
    "type": {"enum": EVENT_TYPES}, "sequence_number": INT, "response": RESPONSE,
    # the `error` event's (a refusal after the stream opened while its model loaded)
    "code": STR, "message": STR, "param": nullable(STR)}}
SSE = {"text/event-stream": {"schema": {
    "type": "object", "required": ["event", "data"],
    "description": "the Responses events, each with its sequence_number; the last is "
                   "response.completed, response.incomplete (max_output_tokens) or "
                   "response.failed; a refusal after the stream opened while its model "
                   "loaded is the one `error` event",
    "properties": {"event": {"enum": EVENT_TYPES}, "data": {
        "type": "string", "contentMediaType": "application/json", "contentSchema": EVENT}}}}}
ID = [{"name": "id", "in": "path", "required": True, "schema": STR}]


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(s): {"description": ERROR_STATUSES[s], "content": _json(ERROR)}
            for s in statuses}


def paths(model: dict[str, Any]) -> dict[str, Any]:
    """The two paths, `model` the served model's field (openapi.model_field)."""
    request = REQUEST | {"properties": REQUEST["properties"] | {"model": model}}
    missing = {"404": {"description": "no stored response of that id",
                       "content": _json(ERROR)}}
    return {
        "/v1/responses": {"post": {
            "summary": "OpenAI's Responses API, streamed (SSE) or not",
            "requestBody": {"required": True, "content": _json(request)},
            "responses": {"200": {"description": "the response; with `stream: true`, "
                                                 "events", "content": _json(RESPONSE) | SSE},
                          **_errors(400, 401, 404, 408, 413, 429, 500, 503)}}},
        "/v1/responses/{id}": {
            "get": {"summary": "a stored response", "parameters": ID,
                    "responses": {"200": {"description": "the response",
                                          "content": _json(RESPONSE)},
                                  **missing, **_errors(401, 503)}},
            "delete": {"summary": "delete a stored response", "parameters": ID,
                       "responses": {"200": {"description": "deleted",
                                             "content": _json(DELETED)},
                                     **missing, **_errors(401, 503)}}},
    }
