"""GET /openapi.json: an OpenAPI 3.1 description of every route, request field and response.

The request schemas take their limits from schemas.py (the validator's own constants: roles,
stop and logprobs limits, the fields accepted only at their neutral value); tests/server/
test_openapi.py holds the rest to the validator: the same routes as the app registers, the
same body fields as the parsers read, and each documented bound accepted on one side and
refused on the other. tests/server/test_fuzz.py sends what this document allows (and what it
forbids) to a real server with schemathesis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..request.overflow import NAMES as POLICY_NAMES
from . import schemas
from .responses import LOGPROB_FLOOR

OPENAPI_VERSION = "3.1.0"
MAX_STOP_LENGTH = 256  # = engine.sampling_params.MAX_STOP_LENGTH (refused by SamplingParams)
# responses.finish_reason's
FINISH_REASONS = ["stop", "length", "tool_calls", "cancelled", "shutdown"]
ERROR_STATUSES = {
    400: "a bad field or body (`param` names the field), or a prompt the model cannot take",
    401: "a missing or wrong API key", 404: "an unknown model (with --strict-model-name)",
    408: "the request body did not arrive in time",
    413: "a body over the size limit", 429: "the engine's queue is full (with Retry-After)",
    500: "the engine failed on this request",
    503: "shutting down, no model loaded yet, or too many connections open",
}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional field: absent and null both mean the default."""
    return {"anyOf": [schema, {"type": "null"}]}


def _number(**bounds: float) -> dict[str, Any]:
    return nullable({"type": "number", **bounds})


def _integer(**bounds: int) -> dict[str, Any]:
    return nullable({"type": "integer", **bounds})


def _neutral(accepted: tuple[Any, ...]) -> dict[str, Any]:
    """A field this server cannot honour: only null or its neutral value(s)."""
    return {"enum": [None, *accepted], "description": "not supported: neutral value only"}


STOP_STRING = {"type": "string", "minLength": 1, "maxLength": MAX_STOP_LENGTH}
TOKEN_IDS = {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0},
             "description": "token ids, each below the model's vocabulary size"}

# Fields both completion endpoints read (schemas._parsed)
SHARED: dict[str, dict[str, Any]] = {
    "model": {"type": "string", "minLength": 1, "description": "an id from GET /v1/models"},
    "temperature": _number(minimum=0),
    "top_p": _number(exclusiveMinimum=0, maximum=1),
    "top_k": _integer(minimum=-1),
    "min_p": _number(minimum=0, exclusiveMaximum=1),
    "repetition_penalty": _number(exclusiveMinimum=0),
    "seed": _integer(minimum=0),
    "max_tokens": _integer(minimum=1),
    "stop": nullable({"anyOf": [STOP_STRING, {"type": "array", "items": STOP_STRING,
                                                "maxItems": schemas.MAX_STOP}]}),
    "n": {**_integer(minimum=1, maximum=schemas.MAX_N),
          "description": "choices, prefilled once; with `seed` s, choice i samples with "
                         "seed s + i (an n = 1 request with that seed gives it again)"},
    "stream": nullable({"type": "boolean"}),
    "stream_options": nullable({"type": "object",
                                "properties": {"include_usage": nullable({"type": "boolean"})}}),
    **{name: _neutral(accepted) for name, accepted in schemas.NEUTRAL.items()},
}

# A JSON schema: what JSON Schema cannot say (a schema llguidance can use) is refused with
# 400, code invalid_schema
JSON_SCHEMA = {"type": "object", "description": "a JSON schema (llguidance's subset)"}
SHARED["response_format"] = nullable({"anyOf": [
    {"type": "object", "required": ["type"],
     "properties": {"type": {"enum": ["text", "json_object"]}}},
    {"type": "object", "required": ["type", "json_schema"], "properties": {
        "type": {"const": "json_schema"},
        "json_schema": {"type": "object", "required": ["schema"], "properties": {
            "name": nullable({"type": "string"}), "description": nullable({"type": "string"}),
            "schema": JSON_SCHEMA, "strict": nullable({"type": "boolean"})}}}}]})

TEXT_PART = {"type": "object", "required": ["type", "text"],
             "properties": {"type": {"const": "text"}, "text": {"type": "string"}}}
CONTENT = {"anyOf": [{"type": "string"}, {"type": "array", "items": TEXT_PART}]}
# a user message's files (issue #51): whole in the prompt when they fit, else the passages
# most relevant to the message; one that cannot be read is a 400 naming its part
FILE_PART = {"type": "object", "required": ["type", "file"], "properties": {
    "type": {"const": "file"},
    "file": {"type": "object", "required": ["file_data"], "properties": {
        "filename": {"type": "string"},
        "file_data": {"type": "string", "pattern": "^data:[^;,]*;base64,",
                      "description": "the file as a base64 data URL: text, Markdown, code, "
                                     "CSV, JSON, HTML, PDF (text layer) or DOCX"}}}}}
# a user message's images (issue #52), for a model that sees images: a model that reads text
# only answers a 400 naming the part; http(s) URLs are refused (the server runs offline)
# unless it is started with --allow-image-urls: this document describes the default
IMAGE_PART = {"type": "object", "required": ["type", "image_url"], "properties": {
    "type": {"const": "image_url"},
    "image_url": {"type": "object", "required": ["url"], "properties": {
        "url": {"type": "string", "pattern": "^data:image/[^;,]*;base64,",
                "description": "the image as a base64 data URL: PNG, JPEG, WebP, GIF (its "
                               "first frame) or HEIC; a vision model only"},
        "detail": {"enum": ["auto", "low", "high"]}}}}}
USER_CONTENT = {"anyOf": [{"type": "string"}, {"type": "array", "items": {
    "anyOf": [TEXT_PART, FILE_PART, IMAGE_PART]}}]}
JSON_OBJECT_TEXT = {"type": "string", "contentMediaType": "application/json",
                    "contentSchema": {"type": "object"},
                    "description": "a JSON object as text; \"\" is taken as {}"}
CALL_IN = {"type": "object", "required": ["function"], "properties": {
    "id": {"type": "string"}, "type": {"const": "function"},
    "function": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string", "minLength": 1}, "arguments": JSON_OBJECT_TEXT}}}}
MESSAGE = {"anyOf": [
    {"type": "object", "required": ["role", "content"], "properties": {
        "role": {"enum": [r for r in schemas.ROLES if r not in ("assistant", "tool", "user")]},
        "content": CONTENT}},
    {"type": "object", "required": ["role", "content"], "properties": {
        "role": {"const": "user"}, "content": USER_CONTENT}},
    {"type": "object", "required": ["role"], "properties": {
        "role": {"const": "assistant"}, "content": nullable(CONTENT),
        "tool_calls": nullable({"type": "array", "items": CALL_IN}),
        # earlier thinking, handed to the template, which keeps or drops it
        "reasoning_content": nullable({"type": "string"}),
        "reasoning": nullable({"type": "string"})},
     "anyOf": [{"required": ["content"], "properties": {"content": CONTENT}},
               {"required": ["tool_calls"], "properties": {
                   "tool_calls": {"type": "array", "minItems": 1}}}]},
    {"type": "object", "required": ["role", "content", "tool_call_id"], "properties": {
        "role": {"const": "tool"}, "content": CONTENT,
        "tool_call_id": {"type": "string", "minLength": 1}}}]}
TOOL = {"type": "object", "required": ["type", "function"], "properties": {
    "type": {"const": "function"},
    "function": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
        "description": nullable({"type": "string"}),
        "parameters": nullable({**JSON_SCHEMA, "properties": {
            "type": {"const": "object"}}})}}}}

# the context overflow policy (app/request/overflow.py); either name takes either's values
OVERFLOW = {
    "context_overflow": nullable({"enum": list(POLICY_NAMES), "description": (
        "when the chat outgrows the context: stop (refuse, the default unless `batchchat "
        "serve --context-overflow` says otherwise), truncate_middle (drop whole turns after "
        "the system prompt and the first turn) or rolling_window (drop the oldest turns); "
        "usage.prompt_tokens_details says what was dropped")}),
    "contextOverflowPolicy": nullable({"enum": list(POLICY_NAMES), "description": (
        "LM Studio's name for context_overflow (stopAtLimit, truncateMiddle, "
        "rollingWindow); context_overflow wins when both are given")}),
}
CHAT_REQUEST = {
    "type": "object", "required": ["model", "messages"],
    "description": "Unknown fields are ignored.",
    "properties": SHARED | {
        "messages": {"type": "array", "minItems": 1, "items": MESSAGE},
        "max_completion_tokens": _integer(minimum=1),
        "tools": nullable({"type": "array", "items": TOOL, "maxItems": 128,
                           "description": "distinct function names"}),
        "tool_choice": nullable({"anyOf": [
            {"enum": list(schemas.TOOL_CHOICES)},
            {"type": "object", "required": ["type", "function"], "properties": {
                "type": {"const": "function"},
                "function": {"type": "object", "required": ["name"],
                             "properties": {"name": {"type": "string"}}}}}],
            "description": "'auto' and 'required' need `tools`; a named function must be "
                           "one of them"}),
        "parallel_tool_calls": nullable({"type": "boolean"}),
        "reasoning_effort": nullable({
            "enum": ["none", "minimal", "low", "medium", "high"],
            "description": "a reasoning model's effort, mapped onto its family (template "
                           "variables, gpt-oss's Reasoning level; minimal = low, none = "
                           "thinking off where the model can stop thinking)"}),
        "thinking_token_budget": {**_integer(minimum=0), "description": (
            "vLLM's name: at most this many tokens of thinking, then the end of thinking "
            "is forced and the answer follows (per request, inside the batch)")},
        "chat_template_kwargs": nullable({
            "type": "object", "description": "variables for the chat template "
                                             "(enable_thinking: the thinking switch)"}),
        "logprobs": nullable({"type": "boolean"}),
        "top_logprobs": _integer(minimum=0, maximum=schemas.MAX_TOP_LOGPROBS),
        **OVERFLOW,
    },
    "allOf": [
        # top_logprobs (other than null) needs logprobs: true
        {"if": {"required": ["top_logprobs"],
                "properties": {"top_logprobs": {"not": {"type": "null"}}}},
         "then": {"required": ["logprobs"], "properties": {"logprobs": {"const": True}}}},
        # JSON output and a forced tool call exclude each other
        {"if": {"required": ["response_format"], "properties": {"response_format": {
            "type": "object", "required": ["type"],
            "properties": {"type": {"enum": ["json_object", "json_schema"]}}}}},
         "then": {"properties": {"tool_choice": {
             "not": {"anyOf": [{"const": "required"}, {"type": "object"}]}}}}},
    ],
}

COMPLETION_REQUEST = {
    "type": "object", "required": ["model", "prompt"],
    "description": "Unknown fields are ignored.",
    "properties": SHARED | {
        "prompt": {"anyOf": [
            {"type": "string", "description": "\"\" starts from the start-of-text token"},
            TOKEN_IDS,
            {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 1},
            {"type": "array", "items": TOKEN_IDS, "minItems": 1, "maxItems": 1}]},
        "logprobs": _integer(minimum=0, maximum=schemas.MAX_TOP_LOGPROBS),
        **{name: _neutral(accepted) for name, accepted in schemas.COMPLETION_NEUTRAL.items()},
    },
}


def _obj(properties: dict[str, Any]) -> dict[str, Any]:
    """An object with exactly these (required) fields, as the server sends them."""
    return {"type": "object", "required": list(properties), "properties": properties,
            "additionalProperties": False}


INT, STR = {"type": "integer"}, {"type": "string"}
BYTES = {"type": "array", "items": INT}
USAGE = _obj({"prompt_tokens": INT, "completion_tokens": INT, "total_tokens": INT,
              # dropped_*: what the context overflow policy left out, when it did
              "prompt_tokens_details": _obj({"cached_tokens": INT})
              | {"properties": {"cached_tokens": INT, "dropped_tokens": INT,
                                "dropped_messages": INT}},
              # speculative decoding's drafts: accepted ones are in the completion
              "completion_tokens_details": _obj({"accepted_prediction_tokens": INT,
                                                 "rejected_prediction_tokens": INT,
                                                 # a reasoning model's thinking
                                                 "reasoning_tokens": INT})})
LOGPROB = {"type": "number", "minimum": LOGPROB_FLOOR}  # minus infinity is sent as the floor
CHAT_LOGPROBS = _obj({"content": {"type": "array", "items": _obj({
    "token": STR, "logprob": LOGPROB, "bytes": BYTES,
    "top_logprobs": {"type": "array", "items": _obj({"token": STR, "logprob": LOGPROB,
                                                     "bytes": BYTES})}})}})
COMPLETION_LOGPROBS = _obj({
    "tokens": {"type": "array", "items": STR},
    "token_logprobs": {"type": "array", "items": LOGPROB},
    "top_logprobs": nullable({"type": "array", "items": {
        "type": "object", "additionalProperties": LOGPROB}}),
    "text_offset": {"type": "array", "items": INT}})
FINISH = {"enum": FINISH_REASONS}


# the passages of attached files a reply was given (#51), when they did not fit whole
CITATIONS = {"type": "array", "items": _obj({
    "index": INT, "file": STR, "source": nullable(STR), "page": nullable(INT),
    "first_line": INT, "last_line": INT, "text": STR})}


def _completion(obj: str, choice: dict[str, Any]) -> dict[str, Any]:
    completion = _obj({"id": STR, "object": {"const": obj}, "created": INT, "model": STR,
                       "choices": {"type": "array", "minItems": 1,
                                   "maxItems": schemas.MAX_N,
                                   "items": _obj({"index": INT, **choice})},
                       "usage": USAGE})
    completion["properties"]["citations"] = CITATIONS  # the optional one
    return completion


def _chunk(obj: str, choice: dict[str, Any]) -> dict[str, Any]:
    """A stream chunk: one choice (its `index` says which of n), or (the last, with
    include_usage) none and the usage of them all."""
    chunk = _obj({"id": STR, "object": {"const": obj}, "created": INT, "model": STR,
                  "choices": {"type": "array", "maxItems": 1,
                              "items": _obj({"index": INT, **choice})}})
    chunk["properties"]["usage"] = USAGE  # the optional ones
    chunk["properties"]["citations"] = CITATIONS
    return chunk


ERROR = _obj({"error": _obj({"message": STR, "type": STR,
                             "param": nullable(STR), "code": nullable(STR)})})
CALL = _obj({"id": STR, "type": {"const": "function"},
             "function": _obj({"name": STR, "arguments": STR})})
MESSAGE_OUT = _obj({"role": {"const": "assistant"}, "content": nullable(STR)})
MESSAGE_OUT["properties"]["tool_calls"] = {"type": "array", "minItems": 1, "items": CALL}
# a reasoning model's thinking, under both names clients read (llama.cpp's, vLLM's)
MESSAGE_OUT["properties"]["reasoning_content"] = STR
MESSAGE_OUT["properties"]["reasoning"] = STR
CHAT_COMPLETION = _completion("chat.completion", {
    "message": MESSAGE_OUT, "logprobs": nullable(CHAT_LOGPROBS), "finish_reason": FINISH})
CALL_DELTA = {"type": "object", "required": ["index"], "additionalProperties": False,
              "properties": {"index": INT, "id": STR, "type": {"const": "function"},
                             "function": {"type": "object", "additionalProperties": False,
                                          "properties": {"name": STR, "arguments": STR}}}}
COMPLETION = _completion("text_completion", {
    "text": STR, "logprobs": nullable(COMPLETION_LOGPROBS), "finish_reason": FINISH})
CHAT_CHUNK = _chunk("chat.completion.chunk", {
    "delta": {"type": "object", "additionalProperties": False, "properties": {
        "role": {"const": "assistant"}, "content": STR,
        "reasoning_content": STR, "reasoning": STR,
        "tool_calls": {"type": "array", "items": CALL_DELTA}}},
    "logprobs": nullable(CHAT_LOGPROBS), "finish_reason": nullable(FINISH)})
COMPLETION_CHUNK = _chunk("text_completion", {
    "text": STR, "logprobs": nullable(COMPLETION_LOGPROBS),
    "finish_reason": nullable(FINISH)})
MODELS = _obj({"object": {"const": "list"}, "data": {"type": "array", "items": _obj({
    "id": STR, "object": {"const": "model"}, "created": INT, "owned_by": STR})}})


def _sse(chunk: dict[str, Any]) -> dict[str, Any]:
    """`data: {chunk}` events (an engine failure: `data: {error}`), then `data: [DONE]`;
    the schema is one event's, as OpenAPI 3.1 reads event streams."""
    return {"text/event-stream": {"schema": {
        "type": "object", "required": ["data"], "properties": {"data": {"anyOf": [
            {"const": "[DONE]"},
            {"type": "string", "contentMediaType": "application/json",
             "contentSchema": {"anyOf": [chunk, ERROR]}}]}}}}}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(s): {"description": ERROR_STATUSES[s], "content": _json(ERROR)}
            for s in statuses}


def _completion_op(summary: str, request: dict[str, Any], reply: dict[str, Any],
                   chunk: dict[str, Any]) -> dict[str, Any]:
    return {"post": {
        "summary": summary, "requestBody": {"required": True, "content": _json(request)},
        "responses": {"200": {"description": "the reply; with `stream: true`, SSE chunks",
                              "content": _json(reply) | _sse(chunk)},
                      **_errors(400, 401, 404, 408, 413, 429, 500, 503)}}}


def _get(summary: str, content: dict[str, Any], *errors: int,
         open_: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary,
                          "responses": {"200": {"description": "OK", "content": content},
                                        **_errors(*errors)}}
    if open_:
        op["security"] = []  # answered without a key
    return {"get": op}


def model_field(names: Sequence[str], any_name: bool) -> dict[str, Any]:
    """`model`: the served model's names as an enum (so a client, or a fuzzer, can pick one
    that works); while any name is taken, any other string too (OpenAI's own document
    describes `model` in the same shape)."""
    if not names:
        return SHARED["model"]
    if not any_name:
        return {"enum": list(names), "description": "the served model: its id or an alias"}
    return {"anyOf": [{"enum": list(names)}, {"type": "string", "minLength": 1}],
            "description": "the served model: its id or an alias, or any other name (one "
                           "model is served; the reply names its id)"}


def document(names: Sequence[str] = (), any_name: bool = True) -> dict[str, Any]:
    """The OpenAPI description of this server; `names`: the served model's (empty: any
    string, as before a model is loaded)."""
    from .anthropic import openapi as anthropic  # it builds on this module's pieces
    from .embeddings import openapi as embeddings
    from .responses_api import openapi as responses_api

    model = {"model": model_field(names, any_name)}
    chat = CHAT_REQUEST | {"properties": CHAT_REQUEST["properties"] | model}
    completion = COMPLETION_REQUEST | {"properties": COMPLETION_REQUEST["properties"] | model}
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "BatchChat OpenAI-compatible API", "version": "1",
                 "description": "Errors are in OpenAI's shape: "
                                "{\"error\": {\"message\", \"type\", \"param\", \"code\"}}, "
                                "under /v1/messages in Anthropic's: "
                                "{\"type\": \"error\", \"error\": {\"type\", \"message\"}}."},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"},
                                           "apiKey": anthropic.SECURITY_SCHEME}},
        "security": [{"bearer": []}, {}],  # a key only when the server was given one
        "paths": {
            "/v1/chat/completions": _completion_op("chat, streamed (SSE) or not",
                                                   chat, CHAT_COMPLETION, CHAT_CHUNK),
            "/v1/completions": _completion_op("text completion of one prompt",
                                              completion, COMPLETION, COMPLETION_CHUNK),
            **anthropic.paths(model["model"]),
            **responses_api.paths(model["model"]),
            **embeddings.paths(model["model"]),
            "/v1/models": _get("the served model", _json(MODELS), 401, 503),
            "/health": _get("200 while a model is loaded", _json(
                _obj({"status": {"const": "ok"}})), 503, open_=True),
            "/metrics": _get("Prometheus text", {"text/plain": {"schema": STR}}, 401, 503),
            "/openapi.json": _get("this document", _json({"type": "object"}), 401, 503),
        },
    }


