"""Refusals (app.request's Refusal) as HTTP: the one map from a refusal's code to a status,
and errors in OpenAI's JSON shape: {"error": {"message", "type", "param", "code"}}.
Handlers raise a Refusal anywhere; the error middleware answers it with `response`."""

from __future__ import annotations

from aiohttp import web

from ..request import Refusal, RefusalCode

# The status of each refusal
STATUS: dict[RefusalCode, int] = {
    RefusalCode.INVALID_VALUE: 400, RefusalCode.INVALID_SCHEMA: 400,
    RefusalCode.INVALID_JSON: 400, RefusalCode.INVALID_REQUEST: 400,
    RefusalCode.INVALID_API_KEY: 401, RefusalCode.MODEL_NOT_FOUND: 404,
    RefusalCode.REQUEST_TIMEOUT: 408, RefusalCode.REQUEST_TOO_LARGE: 413,
    RefusalCode.QUEUE_FULL: 429, RefusalCode.ENGINE_ERROR: 500,
    RefusalCode.MODEL_NOT_READY: 503, RefusalCode.SHUTTING_DOWN: 503,
    # a tab's own (never raised here; 400 keeps the map whole)
    RefusalCode.BAD_CHARACTER: 400, RefusalCode.IMAGES_NOT_READ: 400,
    RefusalCode.IMAGES_WITH_TOOLS: 400, RefusalCode.ANSWER_COUNT: 400,
    RefusalCode.CONTEXT_LENGTH_EXCEEDED: 400,
}
# Refusals that end when the client tries again a little later: answered with Retry-After
RETRY = (RefusalCode.QUEUE_FULL, RefusalCode.MODEL_NOT_READY)
# The `type` OpenAI (and vLLM) send with each status
_TYPES = {400: "invalid_request_error", 401: "invalid_request_error",
          404: "invalid_request_error", 405: "invalid_request_error",
          408: "invalid_request_error",
          413: "invalid_request_error", 429: "rate_limit_error", 500: "server_error",
          503: "server_error"}


def status_of(refusal: Refusal) -> int:
    return STATUS[refusal.code]


def refusal_body(refusal: Refusal) -> dict[str, object]:
    return error_body(refusal.message, status_of(refusal), refusal.param, refusal.code.value)


def response(refusal: Refusal, retry_after_s: int) -> web.Response:
    """The JSON answer to a refusal (with Retry-After where trying again helps)."""
    headers = {"Retry-After": str(retry_after_s)} if refusal.code in RETRY else {}
    return web.json_response(refusal_body(refusal), status=status_of(refusal),
                             headers=headers)


def error_body(message: str, status: int, param: str | None = None,
               code: str | None = None) -> dict[str, object]:
    return {"error": {"message": message, "type": _TYPES.get(status, "invalid_request_error"),
                      "param": param, "code": code}}


def invalid(param: str, message: str) -> Refusal:
    """A 400 naming the field, e.g. invalid("temperature", "'temperature' must be >= 0")."""
    return Refusal(RefusalCode.INVALID_VALUE, message, param=param)


def bad_schema(param: str, message: str) -> Refusal:
    """A JSON schema that cannot be used (no JSON schema of schemas can tell it beforehand:
    a code of its own, as the engine's prompt refusals have)."""
    return Refusal(RefusalCode.INVALID_SCHEMA, message, param=param)
