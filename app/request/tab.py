"""A tab's reply as a ChatRequest: the chat's messages, its params (sampling settings,
`response_format`, `tool_choice`) and the tools its MCP servers offer. Refusals say what
the tab got wrong. The Conversation makes it once the bridge has said who answers
(EngineBridge.route, so "no model is ready" comes first) and hands it to
EngineBridge.submit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..reasoning import setting as reasoning_setting
from ..tools import ToolSpecError, parse_tools
from .chat_request import ChatRequest
from .output_format import APP_KEYS, OutputFormatError, grammar_of, response_format_of
from .refusal import Refusal, RefusalCode
from .tool_choice import CHOICES, OpenAIChoice, named, parse_tool_choice


def tab_choice(choice: str, names: Sequence[str] | None = None) -> OpenAIChoice:
    """A tab's tool_choice (OpenAI's words, else a function's name) in OpenAI's form, which
    app/request/tool_choice.py parses. A name none of `names` has any more (its server
    changed its tools) asks for a call to any of them, "required", as tabs always did;
    `names` None: not checked (a remote server is sent the name as it is)."""
    if choice in CHOICES:
        return choice
    return named(choice) if names is None or choice in names else "required"


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
                          reasoning=reasoning_setting.controls(params.get("reasoning")),
                          context_overflow=params.get("context_overflow"),
                          tool_choice=tab_choice(tool_choice), tool_road=bool(tools))
    if not local or not tools:
        return request
    try:
        offered = parse_tools(list(tools))
    except ToolSpecError as exc:
        raise Refusal(RefusalCode.INVALID_SCHEMA if exc.schema else RefusalCode.INVALID_VALUE,
                      f"a tool cannot be offered: {exc}", param=exc.field) from None
    # a tab forces one call at a time (it has no parallel_tool_calls setting)
    choice = parse_tool_choice(tab_choice(tool_choice, [t.name for t in offered]), offered,
                               parallel=False)
    # a tab that names a function offers only it; a forced call's grammar replaces the
    # format's
    return replace(request, grammar=choice.grammar or grammar, forced=bool(choice.forced),
                   tool_choice=choice.openai,
                   tools=choice.forced if choice.mode == "function" else choice.offered)
