"""The OpenAPI description of /v1/messages and /v1/messages/count_tokens (app/server/
openapi.py puts these paths in its document): the request as request.py validates it, the
reply, each stream event and the error in Anthropic's shapes. What JSON Schema cannot say
is in the descriptions: the last message is the user's, tool names are distinct, a named
tool_choice names one of `tools`."""

from __future__ import annotations

from typing import Any

from .. import schemas
from ..openapi import (
    ERROR_STATUSES,
    INT,
    JSON_SCHEMA,
    OVERFLOW,
    SHARED,
    STOP_STRING,
    STR,
    _integer,
    _json,
    _obj,
    nullable,
)
from .request import EFFORTS, THINKING

TEXT_BLOCK = {"type": "object", "required": ["type", "text"],
              "properties": {"type": {"const": "text"}, "text": STR}}
TEXTS = {"anyOf": [STR, {"type": "array", "items": TEXT_BLOCK}]}
TOOL_RESULT = {"type": "object", "required": ["type", "tool_use_id"], "properties": {
    "type": {"const": "tool_result"}, "tool_use_id": {"type": "string", "minLength": 1},
    "content": nullable(TEXTS), "is_error": nullable({"type": "boolean"})}}
TOOL_USE = {"type": "object", "required": ["type", "id", "name", "input"], "properties": {
    "type": {"const": "tool_use"}, "id": {"type": "string", "minLength": 1},
    "name": {"type": "string", "minLength": 1}, "input": {"type": "object"}}}
THINKING_IN = {"type": "object", "required": ["type", "thinking"], "properties": {
    "type": {"const": "thinking"}, "thinking": STR}}
REDACTED = {"type": "object", "required": ["type"],
            "properties": {"type": {"const": "redacted_thinking"}}}
MESSAGE = {"anyOf": [
    {"type": "object", "required": ["role", "content"], "properties": {
        "role": {"const": "user"}, "content": {"anyOf": [STR, {
            "type": "array", "minItems": 1, "items": {"anyOf": [TEXT_BLOCK, TOOL_RESULT]}}]}}},
    {"type": "object", "required": ["role", "content"], "properties": {
        "role": {"const": "assistant"}, "content": {"anyOf": [STR, {
            "type": "array", "items": {"anyOf": [TEXT_BLOCK, TOOL_USE, THINKING_IN,
                                                 REDACTED]}}]}}}],
    "description": "a user's image blocks (base64 source) are read for a model that sees "
                   "images; a text-only model, a URL source and document blocks are refused "
                   "(400 naming the block)"}
TOOL = {"type": "object", "required": ["name", "input_schema"], "properties": {
    "type": nullable({"const": "custom"}),
    "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
    "description": nullable(STR),
    "input_schema": {**JSON_SCHEMA, "properties": {"type": {"const": "object"}}}}}
TOOL_CHOICE = {"anyOf": [
    {"type": "object", "required": ["type"], "properties": {
        "type": {"enum": ["auto", "any", "none"]},
        "disable_parallel_tool_use": nullable({"type": "boolean"})}},
    {"type": "object", "required": ["type", "name"], "properties": {
        "type": {"const": "tool"}, "name": STR,
        "disable_parallel_tool_use": nullable({"type": "boolean"})}}],
    "description": "auto, any and tool need `tools`; a named tool must be one of them"}
THINKING_FIELD = {"anyOf": [
    {"type": "object", "required": ["type", "budget_tokens"], "properties": {
        "type": {"const": "enabled"}, "budget_tokens": {"type": "integer", "minimum": 1}}},
    {"type": "object", "required": ["type"], "properties": {
        "type": {"enum": [t for t in THINKING if t != "enabled"]}}}],
    "description": "a reasoning model's thinking: enabled with a budget of thinking tokens, "
                   "adaptive or between_tools (on, no budget) or disabled; absent: the "
                   "model's default"}
OUTPUT_CONFIG = {"type": "object", "properties": {
    "effort": nullable({"enum": list(EFFORTS), "description": "a reasoning model's effort "
                                                              "(xhigh and max are high)"}),
    "format": nullable({"type": "object", "required": ["type", "schema"], "properties": {
        "type": {"const": "json_schema"}, "schema": JSON_SCHEMA},
        "description": "the reply's text is one JSON value of this schema"})}}
# JSON output and a forced tool call exclude each other (as response_format and tool_choice)
FORMAT_OR_FORCED = [{
    "if": {"required": ["output_config"], "properties": {"output_config": {
        "type": "object", "required": ["format"],
        "properties": {"format": {"type": "object"}}}}},
    "then": {"properties": {"tool_choice": {"not": {
        "type": "object", "required": ["type"],
        "properties": {"type": {"enum": ["any", "tool"]}}}}}}}]

# the prompt's fields, which count_tokens takes too
PROMPT = {
    "model": SHARED["model"],
    "messages": {"type": "array", "minItems": 1, "items": MESSAGE,
                 "description": "the last message must be the user's (no prefill)"},
    "system": nullable(TEXTS),
    "tools": nullable({"type": "array", "items": TOOL, "maxItems": 128,
                       "description": "distinct names"}),
    "tool_choice": nullable(TOOL_CHOICE),
    "thinking": nullable(THINKING_FIELD),
    "output_config": nullable(OUTPUT_CONFIG),
    **OVERFLOW,
}
MESSAGES_REQUEST = {
    "type": "object", "required": ["model", "messages", "max_tokens"],
    "description": "Anthropic's Messages API. Unknown fields are ignored.",
    "properties": PROMPT | {
        "max_tokens": {"type": "integer", "minimum": 1},
        "temperature": SHARED["temperature"], "top_p": SHARED["top_p"],
        "top_k": _integer(minimum=-1),
        "stop_sequences": nullable({"type": "array", "items": STOP_STRING,
                                    "maxItems": schemas.MAX_STOP}),
        "stream": nullable({"type": "boolean"}),
        "metadata": nullable({"type": "object", "description": "taken, not used"}),
    },
    "allOf": FORMAT_OR_FORCED,
}
COUNT_REQUEST = {"type": "object", "required": ["model", "messages"],
                 "description": "The prompt as /v1/messages takes it.", "properties": PROMPT,
                 "allOf": FORMAT_OR_FORCED}

# -- what the server sends ------------------------------------------------------------------
STOP_REASONS = ["end_turn", "max_tokens", "stop_sequence", "tool_use"]
THINKING_OUT = _obj({"type": {"const": "thinking"}, "thinking": STR, "signature": STR})
TEXT_OUT = _obj({"type": {"const": "text"}, "text": STR})
TOOL_USE_OUT = _obj({"type": {"const": "tool_use"}, "id": STR, "name": STR,
                     "input": {"type": "object"}})
USAGE = _obj({"input_tokens": INT, "cache_read_input_tokens": INT, "output_tokens": INT})
MESSAGE_OUT = _obj({
    "id": STR, "type": {"const": "message"}, "role": {"const": "assistant"}, "model": STR,
    "content": {"type": "array", "items": {"anyOf": [THINKING_OUT, TEXT_OUT, TOOL_USE_OUT]}},
    "stop_reason": {"enum": STOP_REASONS}, "stop_sequence": nullable(STR), "usage": USAGE})
ERROR = _obj({"type": {"const": "error"}, "error": _obj({"type": STR, "message": STR})})
START = _obj({"id": STR, "type": {"const": "message"}, "role": {"const": "assistant"},
              "model": STR, "content": {"type": "array", "maxItems": 0},
              "stop_reason": {"type": "null"}, "stop_sequence": {"type": "null"},
              "usage": _obj({"input_tokens": INT, "output_tokens": INT})})
BLOCK_START = {"anyOf": [
    _obj({"type": {"const": "thinking"}, "thinking": {"const": ""}, "signature": STR}),
    _obj({"type": {"const": "text"}, "text": {"const": ""}}),
    _obj({"type": {"const": "tool_use"}, "id": STR, "name": STR,
          "input": {"type": "object", "maxProperties": 0}})]}
DELTA = {"anyOf": [_obj({"type": {"const": "thinking_delta"}, "thinking": STR}),
                   _obj({"type": {"const": "signature_delta"}, "signature": STR}),
                   _obj({"type": {"const": "text_delta"}, "text": STR}),
                   _obj({"type": {"const": "input_json_delta"}, "partial_json": STR})]}
EVENTS = {
    "message_start": _obj({"type": {"const": "message_start"}, "message": START}),
    "ping": _obj({"type": {"const": "ping"}}),
    "content_block_start": _obj({"type": {"const": "content_block_start"}, "index": INT,
                                 "content_block": BLOCK_START}),
    "content_block_delta": _obj({"type": {"const": "content_block_delta"}, "index": INT,
                                 "delta": DELTA}),
    "content_block_stop": _obj({"type": {"const": "content_block_stop"}, "index": INT}),
    "message_delta": _obj({"type": {"const": "message_delta"}, "delta": _obj({
        "stop_reason": {"enum": STOP_REASONS}, "stop_sequence": nullable(STR)}),
        "usage": USAGE}),
    "message_stop": _obj({"type": {"const": "message_stop"}}),
    "error": ERROR,
}
SSE = {"text/event-stream": {"schema": {
    "type": "object", "required": ["event", "data"],
    "description": "Anthropic's events: message_start, ping, per content block "
                   "content_block_start / _delta / _stop, message_delta, message_stop "
                   "(a failure after the start: an error event)",
    "properties": {"event": {"enum": list(EVENTS)}, "data": {
        "type": "string", "contentMediaType": "application/json",
        "contentSchema": {"anyOf": list(EVENTS.values())}}}}}}
SECURITY = [{"bearer": []}, {"apiKey": []}, {}]  # a key only when the server has one
SECURITY_SCHEME = {"type": "apiKey", "in": "header", "name": "x-api-key"}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(s): {"description": ERROR_STATUSES[s], "content": _json(ERROR)}
            for s in statuses}


def paths(model: dict[str, Any]) -> dict[str, Any]:
    """The two paths, `model` the served model's field (openapi.model_field)."""
    messages = MESSAGES_REQUEST | {"properties": MESSAGES_REQUEST["properties"]
                                   | {"model": model}}
    count = COUNT_REQUEST | {"properties": COUNT_REQUEST["properties"] | {"model": model}}
    return {
        "/v1/messages": {"post": {
            "summary": "Anthropic's Messages API, streamed (SSE) or not",
            "security": SECURITY,
            "requestBody": {"required": True, "content": _json(messages)},
            "responses": {"200": {"description": "the message; with `stream: true`, events",
                                  "content": _json(MESSAGE_OUT) | SSE},
                          **_errors(400, 401, 404, 408, 413, 429, 500, 503)}}},
        "/v1/messages/count_tokens": {"post": {
            "summary": "the prompt's tokens, as /v1/messages would run it",
            "security": SECURITY,
            "requestBody": {"required": True, "content": _json(count)},
            "responses": {"200": {"description": "the count",
                                  "content": _json(_obj({"input_tokens": INT}))},
                          **_errors(400, 401, 404, 408, 413, 503)}}},
    }
