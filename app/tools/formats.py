"""How a model family writes a tool call: the markers around it and the parser of the text
between them. mlx-lm's `mlx_lm.tool_parsers` where the model's template names a family
(picked as mlx_lm.tokenizer_utils does), else HERMES, the fallback every model is taught."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# text between the markers (and the request's tools) -> one call or a list of them, each
# {"name", "arguments" (a dict or JSON text), optional "id"}; ValueError if it is none
Parser = Callable[[str, Any], Any]


@dataclass(frozen=True)
class CallFormat:
    name: str
    start: str  # the text that opens a call
    end: str  # the text that closes it ("" = the call runs to the end of the reply)
    parse: Parser


def _hermes(text: str, tools: Any = None) -> dict[str, Any]:
    call = json.loads(text.strip())
    if not isinstance(call, dict):
        raise ValueError("a tool call must be a JSON object")
    return call


# `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`: Hermes' and Qwen's format,
# the one taught to templates without tool support and the one a forced call is made in
HERMES = CallFormat("hermes", "<tool_call>", "</tool_call>", _hermes)


def call_format(parser: str | None) -> CallFormat:
    """The format of an mlx-lm tool parser (its module name under mlx_lm.tool_parsers, e.g.
    "json_tools"), or HERMES for None. Imports mlx-lm only for a named parser."""
    if parser is None or parser == HERMES.name:
        return HERMES
    module = importlib.import_module(f"mlx_lm.tool_parsers.{parser}")
    return CallFormat(parser, module.tool_call_start, module.tool_call_end or "",
                      module.parse_tool_call)
