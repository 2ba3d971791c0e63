"""Turn HTTP statuses and aiohttp exceptions into one clear sentence naming the server."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

import aiohttp

if TYPE_CHECKING:
    from .connection import Connection


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


def describe_status(conn: Connection, status: int, body: str,
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


def describe_exception(conn: Connection, exc: BaseException) -> str:
    who = conn.name
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
