"""Server-sent events off an aiohttp response: the JSON payload of each `data:` event.

aiohttp does the HTTP (chunked encoding, EOF); this only splits the event-stream text format
(https://html.spec.whatwg.org/multipage/server-sent-events.html): `data:` lines joined until a
blank line, comments (`:` — mlx_lm.server's keepalives) and other fields ignored.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp.http_exceptions import LineTooLong

from .errors import too_long_line

DONE = object()  # the `data: [DONE]` sentinel OpenAI-style servers end with


class MalformedStream(Exception):
    """The body is not an event stream of JSON objects; str() says what was wrong."""


async def sse_payloads(resp: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any] | object]:
    """Yield each event's JSON object, or DONE; stops at EOF."""
    data: list[str] = []
    while True:
        try:
            raw = await resp.content.readline()
        except ValueError as exc:  # a line past aiohttp's buffer limit (older aiohttp)
            raise MalformedStream(f"an event line too long to be SSE ({exc})") from None
        except LineTooLong as exc:  # the same, aiohttp >= 3.10: its text invents a 400
            raise MalformedStream(too_long_line(exc)) from None
        if not raw:  # EOF: a last event without its blank line still counts
            if data:
                yield _decode("\n".join(data))
            return
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if not line:
            if data:
                yield _decode("\n".join(data))
                data.clear()
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "error":  # llama.cpp's server reports some failures this way
            raise MalformedStream(f"the server reported an error: {value[:200]}")


def _decode(payload: str) -> dict[str, Any] | object:
    if payload.strip() == "[DONE]":
        return DONE
    try:
        obj = json.loads(payload)
    except ValueError:
        raise MalformedStream(f"malformed SSE data (not JSON): {payload[:80]!r}") from None
    if not isinstance(obj, dict):
        raise MalformedStream(f"malformed SSE data (not a JSON object): {payload[:80]!r}")
    return obj
