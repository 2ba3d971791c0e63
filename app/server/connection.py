"""One HTTP connection: aiohttp's RequestHandler with bounded request-head and body reads,
a cap on open connections, and malformed requests answered in OpenAI's error shape.

aiohttp answers a request it cannot parse (a header over 8 KB, a bad request line) itself,
before any middleware, with a plain-text 400 and a traceback in the log, and it waits for a
request head, or a body, as long as a client cares to send it byte by byte (a slowloris, or
a Content-Length larger than what comes, holds the connection, and its file descriptor,
forever; some two thousand of them ran the process out of file descriptors). `Runner`
serves the app with `Connection`s that answer those requests with JSON and one log line,
close a connection whose head does not arrive in `head_timeout_s`, answer 408 and close
one whose body does not arrive in `body_timeout_s` of its head, and answer 503 and close
one beyond `max_connections`. Each condition logs at most one line per `log_interval_s`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong

from .errors import error_body
from .log_throttle import Throttled

log = logging.getLogger(__name__)
REFUSED_LINGER_S = 1.0  # a refused connection reads (and drops) its request this long


@dataclass(frozen=True, slots=True)
class Limits:
    """What one connection may take (ServerConfig's fields of the same names)."""
    head_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int | None = None  # None: from the file-descriptor limit
    log_interval_s: float = 10.0


def default_max_connections() -> int:
    """Half the process's file-descriptor limit (the engine, the model files and the app
    keep the rest), at most 4096."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 512
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(8, min(4096, soft // 2))


class BodyTimeout(TimeoutError):
    """Set on a request's body stream when it does not end in time: the handler reading it
    answers 408 (a TimeoutError, so aiohttp's own read of what is left stops quietly)."""


class Notes:
    """One server's throttled log lines, one per condition."""

    def __init__(self, interval_s: float) -> None:
        self.head_late = Throttled(log, logging.INFO, interval_s)
        self.body_late = Throttled(log, logging.INFO, interval_s)
        self.refused = Throttled(log, logging.WARNING, interval_s)


class Connection(web.RequestHandler):
    """A connection whose request heads must each arrive within `head_timeout_s` of
    connecting, or of their first byte, and bodies within `body_timeout_s` of their head;
    beyond `max_connections` it is refused."""

    def __init__(self, manager: _Server, *, limits: Limits, notes: Notes,
                 **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._limits = limits
        self._notes = notes
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body: Any = None  # the body stream still arriving (aiohttp's StreamReader)
        self._refused: asyncio.BaseTransport | None = None

    # -- the connection cap ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cap = self._limits.max_connections
        if cap is not None and len(self._manager.connections) >= cap:
            self._refuse(transport, cap)
            return
        super().connection_made(transport)
        self._arm()  # a connection that sends nothing at all is timed out too

    def _refuse(self, transport: asyncio.BaseTransport, cap: int) -> None:
        """Answer 503 without reading the request, and close: no handler, no timers. What
        the client sends meanwhile is read and dropped for a moment (closing with it unread
        would reset the connection, and the client might never see the 503)."""
        self._refused = transport
        peer = transport.get_extra_info("peername")
        self._notes.refused("refused a connection from %s: %d connections are open, the "
                            "most this server takes", peer, cap)
        body = json.dumps(error_body(f"the server has {cap} connections open, the most it "
                                     "takes; try again shortly", 503,
                                     code="too_many_connections")).encode()
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json"
                        b"\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d"
                        b"\r\n\r\n%s" % (len(body), body))
        if transport.can_write_eof():
            transport.write_eof()
        self._loop.call_later(REFUSED_LINGER_S, transport.close)

    def eof_received(self) -> None:
        if self._refused is not None:
            self._refused.close()

    # -- the head's and the body's clocks -------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self._refused is not None:
            return  # dropped
        heads = self._request_count
        super().data_received(data)
        if self._request_count > heads:  # a whole head is in: the handler takes over
            self._disarm()
            self._watch_body()
        elif self._head_timer is None and self._waiting_for_head():
            self._arm()  # the first bytes of the next request's head
        if self._body is not None and self._body.is_eof():
            self._body_done()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        self._body_done()
        if self._refused is not None:
            self._refused = None
            return  # never made: nothing of aiohttp's to take down
        super().connection_lost(exc)

    def _watch_body(self) -> None:
        """The newest request's body must arrive within body_timeout_s of its head."""
        if not self._messages:
            return
        body = self._messages[-1][1]
        if body.is_eof():
            return
        self._body_done()
        self._body = body
        self._body_timer = self._loop.call_later(self._limits.body_timeout_s, self._body_late)

    def _body_done(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        self._body = None

    def _body_late(self) -> None:
        """The handler reading the body answers 408 (read_json); the connection closes
        after it, as it does if no handler reads it."""
        body, self._body_timer, self._body = self._body, None, None
        if body is None or body.is_eof():
            return
        peer = self.transport.get_extra_info("peername") if self.transport else None
        self._notes.body_late("closing a connection from %s: its request body did not "
                              "arrive within %g s", peer, self._limits.body_timeout_s)
        body.set_exception(BodyTimeout(f"the request body did not arrive within "
                                       f"{self._limits.body_timeout_s:g} s"))
        self.close()

    def _waiting_for_head(self) -> bool:
        """Idle between requests: the handler waits for a head (aiohttp's keep-alive check
        asks the same), not busy with a request or its body."""
        return self._waiter is not None and not self._waiter.done()

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self._loop.call_later(self._limits.head_timeout_s, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self._request_count == 0 or self._waiting_for_head():
            peer = self.transport.get_extra_info("peername") if self.transport else None
            self._notes.head_late("closed a connection from %s: no complete request head in "
                                  "%g s", peer, self._limits.head_timeout_s)
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

    def __init__(self, *args: Any, limits: Limits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if limits.max_connections is None:
            from dataclasses import replace

            limits = replace(limits, max_connections=default_max_connections())
        self.limits = limits
        self.notes = Notes(limits.log_interval_s)

    def __call__(self) -> Connection:
        return Connection(self, loop=self._loop, limits=self.limits, notes=self.notes,
                          **self._kwargs)


class Runner(web.AppRunner):
    """An AppRunner whose connections are `Connection`s (aiohttp has no setting for the
    handler class: the server it makes is rebuilt as a `_Server` with the same arguments)."""

    def __init__(self, app: web.Application, *, limits: Limits, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._limits = limits

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()  # the app's start-up runs here
        return _Server(made.request_handler, request_factory=made.request_factory,
                       handler_cancellation=made.handler_cancellation,
                       loop=asyncio.get_running_loop(), limits=self._limits, **made._kwargs)
