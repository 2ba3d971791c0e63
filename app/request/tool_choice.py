"""`tool_choice`: what it means and when it is refused, for every request.

One shape is parsed, OpenAI's: "auto" (the model may call the tools offered), "none" (it
may not: none are offered), "required" (it must call one of them) or
{"type": "function", "function": {"name": …}} (it must call that one). The API server
passes a body's value as it came (app/server/schemas.py); a tab turns its own string form
into this one first (app/request/tab.py `tab_choice`). A value that cannot be used is
refused here, as RefusalCode.INVALID_VALUE naming `tool_choice`, whoever asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..tools import Tool
from .engine_input import forced_call_grammar
from .refusal import Refusal, RefusalCode

CHOICES = ("auto", "none", "required")  # OpenAI's words; else a function named as an object
OpenAIChoice = str | Mapping[str, Any]  # tool_choice as OpenAI writes it


def named(name: str) -> dict[str, Any]:
    """OpenAI's form of "call the function `name`"."""
    return {"type": "function", "function": {"name": name}}


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """A parsed tool_choice: `mode` ("auto", "none", "required" or "function": one named
    function, `name`), the tools the prompt offers, those a call is forced among (empty:
    no call is forced) and the grammar forcing it."""

    mode: str
    name: str | None = None
    offered: tuple[Tool, ...] = ()
    forced: tuple[Tool, ...] = ()
    grammar: str | None = None

    @property
    def openai(self) -> OpenAIChoice:
        """As OpenAI writes it (what a request carries, and a remote server is sent)."""
        return named(self.name) if self.name is not None else self.mode


def _refused(message: str) -> Refusal:
    return Refusal(RefusalCode.INVALID_VALUE, message, param="tool_choice")


def parse_tool_choice(value: OpenAIChoice | None, tools: Sequence[Tool], *,
                      parallel: bool) -> ToolChoice:
    """What `value` asks of a reply offered `tools` (None: "auto" with tools, else
    "none"); `parallel`: a forced "required" call may be several (1 to 4). Refusal when it
    cannot be used: an unknown word or shape, a function not among `tools`, "auto" or
    "required" with no tools; INVALID_SCHEMA naming `tools` when their schemas together
    cannot force a call."""
    if value is None:
        value = "auto" if tools else "none"
    name: str | None = None
    if isinstance(value, Mapping):
        fn = value.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else None
        forced = [t for t in tools if t.name == name]
        if value.get("type") != "function" or not forced:
            raise _refused("'tool_choice' must name one of 'tools' as {\"type\": "
                           "\"function\", \"function\": {\"name\": ...}}")
        mode = "function"
    elif value not in CHOICES:
        raise _refused(f"'tool_choice' must be one of {', '.join(CHOICES)} or a named "
                       "function")
    else:
        mode = str(value)
        if mode != "none" and not tools:
            raise _refused(f"'tool_choice': '{mode}' needs 'tools'")
        forced = list(tools) if mode == "required" else []
    if mode == "none":
        return ToolChoice(mode)
    if not forced:
        return ToolChoice(mode, name, tuple(tools))
    try:
        grammar = forced_call_grammar(forced, parallel=parallel and mode == "required")
    except ValueError as exc:  # a GrammarError: the schemas together cannot be used
        raise Refusal(RefusalCode.INVALID_SCHEMA, f"'tools' cannot force a call: {exc}",
                      param="tools") from None
    return ToolChoice(mode, name, tuple(tools), tuple(forced), grammar)
