"""A tab's reply with tools on the local engine: its prompt (the model's template rendering
the tools, or app.tools' fallback section for a template without tool support), the grammar
that forces a call (tool_choice "required" or a function's name), the format calls come in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..tools import (
    HERMES,
    CallFormat,
    call_format,
    call_grammar,
    fallback_messages,
    parse_tools,
    template_messages,
)
from .local_target import LocalTarget


def tool_request(target: LocalTarget, messages: Sequence[Mapping[str, Any]],
                 tools: Sequence[Mapping[str, Any]], tool_choice: str
                 ) -> tuple[dict[str, Any], str | None, CallFormat]:
    """({"messages": …} or {"prompt_tokens": …}, the forcing grammar or None, the format).
    ToolSpecError for a tool the machinery cannot use; RequestRejected if the template
    refuses the messages."""
    offered = parse_tools(list(tools))
    if tool_choice not in ("auto", "none", "required"):  # a function's name
        offered = [t for t in offered if t.name == tool_choice] or offered
    forced = tool_choice != "auto" and tool_choice != "none"
    plain = [{k: v for k, v in m.items() if k != "token_ids"} for m in messages]
    renders, parser = target.tool_template()
    shown = offered if tool_choice != "none" else []
    if renders:
        what: dict[str, Any] = {"prompt_tokens": target.chat_tokens(
            template_messages(plain), [t.openai() for t in shown] or None)}
    else:
        what = {"messages": fallback_messages(plain, shown)}
    # a forced call is made in HERMES' format (call_grammar), as is one the fallback asks for
    fmt = HERMES if forced or not renders else call_format(parser)
    grammar = call_grammar(offered, parallel=False) if forced else None
    return what, grammar, fmt
