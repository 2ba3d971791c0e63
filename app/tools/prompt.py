"""A conversation with tools as a prompt for a local model: the model's template renders
them if it can, else the fallback section does; and the format the reply's calls come in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .formats import HERMES, CallFormat, call_format
from .render import fallback_messages, template_messages
from .spec import Tool


class Renderer(Protocol):
    """What a loaded model offers (app.bridge's LocalTarget is one)."""

    def tool_template(self) -> tuple[bool, str | None]: ...

    def chat_tokens(self, messages: Sequence[Mapping[str, Any]],
                    tools: Sequence[Mapping[str, Any]] | None = None,
                    template_kwargs: Mapping[str, Any] | None = None) -> list[int]: ...


def tool_prompt(target: Renderer, messages: Sequence[Mapping[str, Any]],
                tools: Sequence[Tool], *, forced: bool = False,
                template_kwargs: Mapping[str, Any] | None = None
                ) -> tuple[dict[str, Any], CallFormat | None]:
    """(what to submit: {"messages": …} or {"prompt_tokens": …}, the format the reply's
    calls are parsed in: None when no tools are offered). `messages` in OpenAI's shape
    (assistant `tool_calls`, `tool` results); `forced`: the reply is constrained by
    call_grammar (HERMES' format); `template_kwargs`: the template's variables (a
    reasoning model's thinking switch). The template's own errors propagate."""
    renders, parser = target.tool_template()
    if renders:
        tokens = target.chat_tokens(template_messages(messages),
                                    [t.openai() for t in tools] or None, template_kwargs)
        what: dict[str, Any] = {"prompt_tokens": tokens}
    else:
        what = {"messages": fallback_messages(messages, tools)}
        if template_kwargs:
            what["template_kwargs"] = dict(template_kwargs)
    if not tools:
        return what, None
    # a forced call is made in HERMES' format; so is one the fallback section asked for
    if forced or not renders:
        return what, HERMES
    return what, call_format(parser)
