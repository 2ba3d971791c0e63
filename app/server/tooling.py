"""A chat request with tools: its prompt (the model's template rendering the tools, or the
fallback section for a template without tool support) and the format its calls come in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..tools import (
    HERMES,
    CallFormat,
    CallStream,
    call_format,
    fallback_messages,
    template_messages,
)

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
    renders, parser = target.tool_template()
    offered = list(parsed.tools)
    if renders:
        tokens = target.chat_tokens(template_messages(parsed.messages),
                                    [t.openai() for t in offered] or None)
        what: dict[str, Any] = {"prompt_tokens": tokens}
    else:
        what = {"messages": fallback_messages(parsed.messages, offered)}
    if not offered:
        return what, None
    # a forced call is made in HERMES' format (call_grammar); so is a call the fallback
    # section asked for; else the model family's own
    if parsed.tool_choice in FORCED or not renders:
        return what, HERMES
    return what, call_format(parser)


def call_stream(parsed: ParsedRequest, fmt: CallFormat | None) -> CallStream | None:
    """A fresh parser of one choice's calls (None without tools)."""
    if fmt is None:
        return None
    return CallStream(fmt, [t.name for t in parsed.tools], [t.openai() for t in parsed.tools])
