"""A tab's reply with tools on the local engine: its prompt and call format (app.tools'
`tool_prompt`, shared with the API server) and the grammar that forces a call (tool_choice
"required" or a function's name)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..tools import CallFormat, call_grammar, parse_tools
from ..tools.prompt import tool_prompt
from .local_target import LocalTarget


def tool_request(target: LocalTarget, messages: Sequence[Mapping[str, Any]],
                 tools: Sequence[Mapping[str, Any]], tool_choice: str
                 ) -> tuple[dict[str, Any], str | None, CallFormat | None]:
    """({"messages": …} or {"prompt_tokens": …}, the forcing grammar or None, the format
    calls come in). ToolSpecError for a tool the machinery cannot use; the template's own
    errors propagate."""
    offered = parse_tools(list(tools))
    if tool_choice not in ("auto", "none", "required"):  # a function's name
        offered = [t for t in offered if t.name == tool_choice] or offered
    forced = tool_choice not in ("auto", "none")
    plain = [{k: v for k, v in m.items() if k != "token_ids"} for m in messages]
    what, fmt = tool_prompt(target, plain, offered if tool_choice != "none" else [],
                            forced=forced)
    grammar = call_grammar(offered, parallel=False) if forced else None
    return what, grammar, fmt
