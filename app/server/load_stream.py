"""A streaming request's SSE response, opened early while its model loads (issue #50).

A streamed completion naming a model that is still loading waits for the load; rather than
a silent wait, the fleet middleware (fleet_api.py) opens the request's SSE response at the
load's first progress report and writes the progress as SSE comment lines, which every SSE
client ignores (the WHATWG rule for a line starting with ':'; the `openai` and `anthropic`
clients skip them) and a raw reader can parse:

    : loading {"model":"tiny-a","stage":"weights","progress":0.42}
    : loaded {"model":"tiny-a"}

The completion's handler then streams into that same response (`sse_response`). What goes
wrong after it was opened can no longer be an HTTP status: it is one error event in the
path's dialect (`error_event`), as a failure in the middle of a stream is.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any

from aiohttp import web

from ..request import Refusal
from . import errors
from .anthropic import errors as anthropic_errors
from .anthropic.events import event as anthropic_event
from .responses import sse
from .responses_api.events import error_event as responses_error_event

# the response opened early for the request being answered (each request is a task of its
# own, so its handler, called from the middleware in that task, reads its own)
_opened: ContextVar[web.StreamResponse | None] = ContextVar("batchchat_load_stream",
                                                            default=None)
# the paths that answer `"stream": true` with SSE
STREAMING_PATHS = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/messages",
                             "/v1/responses"})


def streams(path: str, body: Any) -> bool:
    """Whether the request at `path` with `body` is answered as SSE."""
    return path in STREAMING_PATHS and isinstance(body, dict) and body.get("stream") is True


def sse_response(request: web.Request, cors_origin: str | None) -> web.StreamResponse:
    """The response a streaming handler writes to: the one opened while its model loaded,
    or a new one (prepare it: a no-op for the opened one)."""
    opened = _opened.get()
    if opened is not None:
        return opened
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
    if cors_origin is not None:
        response.headers["Access-Control-Allow-Origin"] = cors_origin
    return response


async def open_early(request: web.Request, cors_origin: str | None) -> web.StreamResponse:
    """The request's SSE response, prepared now (its headers sent) and kept for its handler."""
    response = sse_response(request, cors_origin)
    await response.prepare(request)
    _opened.set(response)
    return response


def opened() -> web.StreamResponse | None:
    """The response opened early for the request being answered (None: none was)."""
    return _opened.get()


def forget() -> None:
    """The request is answered (a connection's next request must not find its response)."""
    _opened.set(None)


def progress_line(model: str, stage: str, fraction: float) -> bytes:
    """One comment line of a load's progress."""
    data = {"model": model, "stage": stage, "progress": round(fraction, 3)}
    return f": loading {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def loaded_line(model: str) -> bytes:
    return f": loaded {json.dumps({'model': model}, separators=(',', ':'))}\n\n".encode()


def error_event(path: str, refusal: Refusal) -> bytes:
    """A refusal as the one error event of an SSE stream already begun, in the dialect of
    `path`: Anthropic's `event: error`, the Responses API's `error` event, else OpenAI's
    `data: {"error": …}` (which the `openai` client raises as an APIError) and [DONE]."""
    if anthropic_errors.speaks_anthropic(path):
        status = errors.status_of(refusal)
        return anthropic_event(anthropic_errors.error_body(refusal.message, status))
    if path == "/v1/responses":
        return responses_error_event(refusal.code.value, refusal.message, refusal.param)
    return sse(errors.refusal_body(refusal)) + sse("[DONE]")
