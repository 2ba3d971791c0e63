"""Errors in OpenAI's JSON shape: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

# The `type` OpenAI (and vLLM) send with each status
_TYPES = {400: "invalid_request_error", 401: "invalid_request_error",
          404: "invalid_request_error", 405: "invalid_request_error",
          408: "invalid_request_error",
          413: "invalid_request_error", 429: "rate_limit_error", 500: "server_error",
          503: "server_error"}


class ApiError(Exception):
    """Raised anywhere in a handler; the error middleware turns it into the JSON response."""

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str | None = None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, object]:
        return error_body(self.message, self.status, self.param, self.code)

    def response(self) -> web.Response:
        return web.json_response(self.body(), status=self.status, headers=self.headers)


def error_body(message: str, status: int, param: str | None = None,
               code: str | None = None) -> dict[str, object]:
    return {"error": {"message": message, "type": _TYPES.get(status, "invalid_request_error"),
                      "param": param, "code": code}}


def invalid(param: str, message: str) -> ApiError:
    """A 400 naming the field, e.g. invalid("temperature", "'temperature' must be >= 0")."""
    return ApiError(400, message, param=param, code="invalid_value")
