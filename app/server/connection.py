"""One HTTP connection: aiohttp's RequestHandler with a bounded request-head read and
malformed requests answered in OpenAI's error shape.

aiohttp answers a request it cannot parse (a header over 8 KB, a bad request line) itself,
before any middleware, with a plain-text 400 and a traceback in the log, and it waits for a
request head as long as a client cares to send it byte by byte (a slowloris holds the
connection, and its file descriptor, forever). `Runner` serves the app with `Connection`s
that answer those requests with JSON and one log line, and close a connection whose head
does not arrive in `head_timeout_s`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong

from .errors import error_body

log = logging.getLogger(__name__)


class Connection(web.RequestHandler):
    """A connection whose request heads must each arrive within `head_timeout_s` of
    connecting, or of their first byte."""

    def __init__(self, manager: web.Server, *, head_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._head_timeout_s = head_timeout_s
        self._head_timer: asyncio.TimerHandle | None = None

    # -- the head's clock -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()  # a connection that sends nothing at all is timed out too

    def data_received(self, data: bytes) -> None:
        heads = self._request_count
        super().data_received(data)
        if self._request_count > heads:  # a whole head is in: the handler takes over
            self._disarm()
        elif self._head_timer is None and self._waiting_for_head():
            self._arm()  # the first bytes of the next request's head

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _waiting_for_head(self) -> bool:
        """Idle between requests: the handler waits for a head (aiohttp's keep-alive check
        asks the same), not busy with a request or its body."""
        return self._waiter is not None and not self._waiter.done()

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self._loop.call_later(self._head_timeout_s, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self._request_count == 0 or self._waiting_for_head():
            peer = self.transport.get_extra_info("peername") if self.transport else None
            log.info("closed a connection from %s: no complete request head in %.0f s",
                     peer, self._head_timeout_s)
            self.force_close()

    # -- requests aiohttp cannot parse, and unhandled errors --------------------------------
    def handle_error(self, request: web.BaseRequest, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """OpenAI's JSON error shape instead of aiohttp's plain text. A request that cannot
        be parsed is the client's fault: one log line, not a traceback."""
        if isinstance(exc, HttpProcessingError):
            if isinstance(exc, LineTooLong):
                status = 431  # Request Header Fields Too Large
                limit = exc.args[1] if len(exc.args) > 1 else self.max_field_size
                text = f"the request line or a header is longer than {limit} bytes"
            else:
                text = f"malformed HTTP request: {exc.message}"
            log.warning("refused a request from %s: %s", request.remote, exc.message)
            code = "request_header_too_large" if status == 431 else "invalid_request"
        else:
            # a bug: aiohttp logs the traceback (and raises if the reply had started)
            super().handle_error(request, status, exc, message)
            text = message or {500: "internal server error",
                               504: "the request timed out"}.get(status, "error")
            code = "internal_error" if status == 500 else None
        response = web.json_response(error_body(text, status, code=code), status=status)
        response.force_close()
        return response


class _Server(web.Server):
    """aiohttp's low-level server, making `Connection`s."""

    def __init__(self, *args: Any, head_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_timeout_s = head_timeout_s

    def __call__(self) -> Connection:
        return Connection(self, loop=self._loop, head_timeout_s=self.head_timeout_s,
                          **self._kwargs)


class Runner(web.AppRunner):
    """An AppRunner whose connections are `Connection`s (aiohttp has no setting for the
    handler class: the server it makes is rebuilt as a `_Server` with the same arguments)."""

    def __init__(self, app: web.Application, *, head_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._head_timeout_s = head_timeout_s

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()  # the app's start-up runs here
        return _Server(made.request_handler, request_factory=made.request_factory,
                       handler_cancellation=made.handler_cancellation,
                       loop=asyncio.get_running_loop(), head_timeout_s=self._head_timeout_s,
                       **made._kwargs)
