"""A chat request with tools: its prompt and the parser of each choice's calls
(app/tools does the work)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..tools import CallFormat, CallStream, tool_prompt

if TYPE_CHECKING:
    from ..bridge import LocalTarget
    from .schemas import ParsedRequest

FORCED = ("required", "function")  # tool_choice values that constrain the reply


def prompt(parsed: ParsedRequest, target: LocalTarget) -> tuple[dict[str, Any],
                                                                 CallFormat | None]:
    """(what to submit: messages or prompt_tokens, the format calls are parsed in: None
    when no tools are offered). RequestRejected if the template refuses the messages."""
    if parsed.messages is None or not parsed.uses_tools:
        return {"messages": parsed.messages}, None
    return tool_prompt(target, parsed.messages, parsed.tools,
                       forced=parsed.tool_choice in FORCED)


def call_stream(parsed: ParsedRequest, fmt: CallFormat | None) -> CallStream | None:
    """A fresh parser of one choice's calls (None without tools)."""
    if fmt is None:
        return None
    return CallStream(fmt, [t.name for t in parsed.tools], [t.openai() for t in parsed.tools])
