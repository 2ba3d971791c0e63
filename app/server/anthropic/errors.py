"""Errors in Anthropic's shape: {"type": "error", "error": {"type", "message"}}, with the
same statuses as the OpenAI routes (app/server/errors.py maps each refusal to its status).
The refusal's own code travels in a header (ERROR_CODE_HEADER): Anthropic's body has no
field for it, and a client or test can still tell e.g. a prompt the model cannot take from a
bad field."""

from __future__ import annotations

from aiohttp import web

from ...request import Refusal
from ..errors import RETRY, status_of

PATH_PREFIX = "/v1/messages"  # the routes answered in this shape
ERROR_CODE_HEADER = "x-batchchat-error-code"
# Anthropic's error types by status (its documented ones; 503 is theirs for a server that
# cannot take requests now, as 529)
_TYPES = {400: "invalid_request_error", 401: "authentication_error",
          403: "permission_error", 404: "not_found_error", 405: "invalid_request_error",
          408: "timeout_error", 413: "request_too_large", 429: "rate_limit_error",
          500: "api_error", 503: "overloaded_error"}


def speaks_anthropic(path: str) -> bool:
    return path == PATH_PREFIX or path.startswith(PATH_PREFIX + "/")


def error_body(message: str, status: int) -> dict[str, object]:
    return {"type": "error", "error": {"type": _TYPES.get(status, "api_error"),
                                       "message": message}}


def response(refusal: Refusal, retry_after_s: int) -> web.Response:
    """The JSON answer to a refusal (with Retry-After where trying again helps)."""
    headers = {ERROR_CODE_HEADER: refusal.code.value}
    if refusal.code in RETRY:
        headers["Retry-After"] = str(retry_after_s)
    status = status_of(refusal)
    return web.json_response(error_body(refusal.message, status), status=status,
                             headers=headers)
