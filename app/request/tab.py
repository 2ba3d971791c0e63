"""A tab's reply as a ChatRequest: the chat's messages, its params (sampling settings,
`response_format`, `tool_choice`) and the tools its MCP servers offer. Refusals say what
the tab got wrong. The Conversation makes it once the bridge has said who answers
(EngineBridge.route, so "no model is ready" comes first) and hands it to
EngineBridge.submit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..output_format import APP_KEYS, OutputFormatError, grammar_of, response_format_of
from ..tools import ToolSpecError, parse_tools
from .chat_request import ChatRequest
from .engine_input import forced_call_grammar
from .refusal import Refusal, RefusalCode

CHOICES = ("auto", "none", "required")  # else a tab's tool_choice is a function's name


def tab_request(messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any],
                tools: Sequence[Mapping[str, Any]] | None = None,
                tool_choice: str = "auto", *, local: bool = True) -> ChatRequest:
    """The request for one reply; Refusal for a format or tool that cannot be used.
    `local`: for the local engine, whose grammar is built here (checked); a remote
    server gets the format and the tools as given (the format checked all the same)."""
    sampling = {k: v for k, v in params.items() if k not in APP_KEYS}
    try:
        fmt = response_format_of(params.get("response_format"))
        grammar = grammar_of(params.get("response_format")) if fmt is not None else None
    except OutputFormatError as exc:
        raise Refusal(RefusalCode.INVALID_VALUE, str(exc), param="response_format") from None
    request = ChatRequest(messages=list(messages), params=sampling, response_format=fmt,
                          grammar=grammar, call_tools=tuple(tools or ()),
                          tool_choice=tool_choice, tool_road=bool(tools))
    if not local or not tools:
        return request
    try:
        offered = parse_tools(list(tools))
    except ToolSpecError as exc:
        raise Refusal(RefusalCode.INVALID_SCHEMA if exc.schema else RefusalCode.INVALID_VALUE,
                      f"a tool cannot be offered: {exc}", param=exc.field) from None
    if tool_choice not in CHOICES:  # a function's name: only it is offered
        offered = [t for t in offered if t.name == tool_choice] or offered
    forced = tool_choice not in ("auto", "none")
    if forced:  # a call forced: its grammar replaces the format's
        try:
            grammar = forced_call_grammar(offered, parallel=False)
        except ValueError as exc:
            raise Refusal(RefusalCode.INVALID_SCHEMA, f"a tool cannot be offered: {exc}",
                          param="tools") from None
    return replace(request, grammar=grammar, forced=forced,
                   tools=tuple(offered) if tool_choice != "none" else ())
