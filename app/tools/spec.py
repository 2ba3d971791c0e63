"""Tools as OpenAI describes them (`{"type": "function", "function": {name, description,
parameters}}`), checked: a bad one raises ToolSpecError naming the field."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # OpenAI's rule for function names
MAX_TOOLS = 128


class ToolSpecError(ValueError):
    """A tool definition that cannot be used; `field` names where (e.g. tools[1].type)."""

    def __init__(self, field: str, message: str, schema: bool = False) -> None:
        super().__init__(message)
        self.field = field
        self.schema = schema  # a JSON schema the grammar builder cannot use


@dataclass(frozen=True)
class Tool:
    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})

    def openai(self) -> dict[str, Any]:
        """This tool in OpenAI's shape (what chat templates take as `tools`)."""
        described = {"description": self.description} if self.description else {}
        return {"type": "function", "function": {
            "name": self.name, **described, "parameters": self.parameters}}


def parse_tools(value: Any, where: str = "tools") -> list[Tool]:
    """The tools of a request; ToolSpecError for anything but a list of function tools with
    distinct valid names and an object schema as `parameters`."""
    if not isinstance(value, list) or len(value) > MAX_TOOLS:
        raise ToolSpecError(where, f"'{where}' must be a list of at most {MAX_TOOLS} tools")
    tools: list[Tool] = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise ToolSpecError(at, f"'{at}' must be an object")
        if item.get("type") != "function":
            raise ToolSpecError(f"{at}.type", f"'{at}.type' must be 'function' (the only "
                                              "tool type this server supports)")
        fn = item.get("function")
        if not isinstance(fn, Mapping):
            raise ToolSpecError(f"{at}.function", f"'{at}.function' must be an object")
        name = fn.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise ToolSpecError(f"{at}.function.name", f"'{at}.function.name' must be 1-64 "
                                                       "letters, digits, '_', '.' or '-'")
        if any(t.name == name for t in tools):
            raise ToolSpecError(f"{at}.function.name", f"two tools are named '{name}'")
        description = fn.get("description")
        description = "" if description is None else description  # {} is no description
        if not isinstance(description, str):
            raise ToolSpecError(f"{at}.function.description",
                                f"'{at}.function.description' must be a string")
        params = fn.get("parameters")
        params = {"type": "object", "properties": {}} if params is None else params
        if not isinstance(params, Mapping) or params.get("type", "object") != "object":
            raise ToolSpecError(f"{at}.function.parameters",
                                f"'{at}.function.parameters' must be a JSON schema of an object")
        _check_schema(dict(params), f"{at}.function.parameters")
        tools.append(Tool(name, description, dict(params)))
    return tools


def _check_schema(schema: dict[str, Any], where: str) -> None:
    """A JSON schema the grammar builder can use (it is what forces a call's arguments)."""
    from engine.public import GrammarError, json_schema_grammar

    try:
        json_schema_grammar(schema)
    except GrammarError as exc:
        raise ToolSpecError(where, f"'{where}' is not a usable JSON schema: {exc}",
                            schema=True) from None
