"""Turn HTTP statuses and aiohttp exceptions into one clear sentence naming the server."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Protocol

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong


class Server(Protocol):
    """What a sentence names of a server: app.remote.connection.Connection has it. A
    protocol, not that class, since connection.py uses these sentences (no import circle)."""

    @property
    def name(self) -> str: ...
    @property
    def base_url(self) -> str: ...
    @property
    def api_root(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def api_key(self) -> str | None: ...
    @property
    def connect_timeout_s(self) -> float: ...
    @property
    def read_timeout_s(self) -> float: ...


class RemoteError(Exception):
    """A request to a remote server failed; str() is the message to show."""


def server_message(body: str) -> str:
    """The server's own explanation from an error body (OpenAI, vLLM, llama.cpp shapes)."""
    try:
        data = json.loads(body)
    except ValueError:
        return " ".join(body.split())[:200]
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err is not None:
            return str(err)[:200]
    return " ".join(body.split())[:200]


def describe_status(conn: Server, status: int, body: str,
                    headers: Mapping[str, str]) -> str:
    said = server_message(body)
    tail = f": {said}" if said else ""
    who = conn.name
    if status in (401, 403):
        key = "the API key was refused" if conn.api_key else "it needs an API key"
        return f"{who}: not authorized ({status}): {key}{tail}"
    if status == 404:
        return (f"{who}: not found (404): unknown model {conn.model!r} or no OpenAI API at "
                f"{conn.api_root}{tail}")
    if status == 429:
        retry = headers.get("Retry-After")
        wait = "" if not retry else (f"; retry after {retry} s" if retry.isdigit()
                                     else f"; retry after {retry}")  # an HTTP date
        return f"{who}: too many requests (429){wait}{tail}"
    if status >= 500:
        return f"{who}: server error ({status}){tail}"
    return f"{who}: request refused ({status}){tail}"


def describe_exception(conn: Server, exc: BaseException) -> str:
    who = conn.name
    bad_http = _bad_http(exc)
    if bad_http is not None:
        return f"{who}: {describe_bad_http(conn, bad_http)}"
    # Order matters: the TLS and timeout classes subclass the generic ones below them.
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        cert = exc.certificate_error
        why = getattr(cert, "verify_message", None) or str(cert)
        return (f"{who}: TLS error connecting to {conn.base_url}: its certificate was not "
                f"accepted ({why})")
    if isinstance(exc, aiohttp.ClientSSLError):
        reason = getattr(exc.os_error, "reason", None)
        why = reason.replace("_", " ").lower() if reason else str(exc.os_error)
        return (f"{who}: TLS error connecting to {conn.base_url}: {why} (is it an https "
                "server?)")
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return (f"{who}: no connection to {conn.base_url} within "
                f"{conn.connect_timeout_s:g} s (connect timeout)")
    if isinstance(exc, aiohttp.ClientConnectorError):
        err = exc.os_error
        reason = os.strerror(err.errno) if err.errno else (err.strerror or str(err))
        return f"{who}: cannot reach {conn.base_url}: {reason.lower()}"
    if isinstance(exc, aiohttp.SocketTimeoutError | aiohttp.ServerTimeoutError | TimeoutError):
        return (f"{who}: the server sent nothing for {conn.read_timeout_s:g} s "
                "(read timeout)")
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError
                  | aiohttp.ClientOSError):
        return f"{who}: the server dropped the connection mid-reply ({type(exc).__name__})"
    return f"{who}: {type(exc).__name__}: {exc}"


def describe_bad_http(conn: Server, exc: HttpProcessingError) -> str:
    """What a reply aiohttp could not parse means (its own text invents a status 400)."""
    if isinstance(exc, LineTooLong) or _TOO_LONG.match(exc.message or ""):
        return too_long_line(exc)
    # One line, without the parser's caret under the bad byte.
    said = " ".join(w for w in str(exc.message or type(exc).__name__).split() if w != "^")
    said = said if len(said) <= 120 else said[:120] + "\u2026"
    return (f"the server at {conn.base_url} did not answer HTTP (its reply could not be "
            f"read: {said})")


def too_long_line(exc: HttpProcessingError) -> str:
    """LineTooLong: a header or event line past aiohttp's limit, which it sends as args[1]
    (and in its message, all a re-raised copy keeps)."""
    limit = exc.args[1] if isinstance(exc, LineTooLong) and len(exc.args) > 1 else None
    if limit is None:
        found = _TOO_LONG.match(exc.message or "")
        limit = found.group(1) if found else "the allowed number of"
    return f"the server sent a line longer than {limit} bytes"


_TOO_LONG = re.compile(r"Got more than (\d+) bytes")


def _bad_http(exc: BaseException) -> HttpProcessingError | None:
    """The parse error behind `exc`, if it is one: aiohttp raises a reply it could not parse
    as ClientResponseError from an HttpProcessingError (with the parser's message), at times
    itself from the parser's own error (BadStatusLine, LineTooLong, ...). Not a payload
    error: a body cut short is a dropped connection, described as such."""
    if isinstance(exc, HttpProcessingError):
        return exc
    cause = exc.__cause__
    if not isinstance(exc, aiohttp.ClientResponseError) \
            or not isinstance(cause, HttpProcessingError):
        return None
    return cause.__cause__ if isinstance(cause.__cause__, HttpProcessingError) else cause
