"""The grammar that forces a reply to be tool calls (tool_choice `required` or a named
function): calls in the HERMES format whose arguments match each function's `parameters`
schema, so they always parse and validate. One Lark grammar with a JSON schema inside
(llguidance's `%json`), built with engine.public's lark_grammar (checked)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .formats import HERMES
from .spec import Tool

MAX_PARALLEL = 4  # calls in one forced reply, at most


def call_schema(tools: Sequence[Tool]) -> dict:
    """One call `{"name": ..., "arguments": {...}}` of any of `tools`, compact JSON."""
    options = [{"type": "object", "properties": {
        "name": {"const": t.name}, "arguments": t.parameters},
        "required": ["name", "arguments"], "additionalProperties": False} for t in tools]
    schema = options[0] if len(options) == 1 else {"anyOf": options}
    return schema | {"x-guidance": {"whitespace_flexible": False}}


def call_rules(tools: Sequence[Tool], *, parallel: bool = True, top: str = "start") -> str:
    """The Lark rules of a reply of one call (or, `parallel`, 1 to MAX_PARALLEL calls, one
    per line) of `tools`, its top rule named `top` (a reasoning model's thinking grammar
    puts them after its thinking as its "answer")."""
    if not tools:
        raise ValueError("a forced call needs at least one tool")
    call = (f"call: {json.dumps(HERMES.start + chr(10))} %json "
            f"{json.dumps(call_schema(tools))} {json.dumps(chr(10) + HERMES.end)}")
    more = f' ("\\n" call){{0,{MAX_PARALLEL - 1}}}' if parallel else ""
    return f"{top}: call{more}\n{call}\n"


def call_grammar(tools: Sequence[Tool], *, parallel: bool = True) -> str:
    """A reply of one call (or, `parallel`, 1 to MAX_PARALLEL calls, one per line) of
    `tools` (give one tool to force that function)."""
    from engine.public import lark_grammar

    return lark_grammar(call_rules(tools, parallel=parallel))
