"""A chat request with tools: the parser of each choice's calls (app/tools does the work;
the prompt is app/request/engine_input.py's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..tools import CallFormat, CallStream

if TYPE_CHECKING:
    from ..request import ChatRequest


def call_stream(request: ChatRequest, fmt: CallFormat | None) -> CallStream | None:
    """A fresh parser of one choice's calls (None without tools)."""
    if fmt is None:
        return None
    return CallStream(fmt, request.call_names, list(request.call_tools))
