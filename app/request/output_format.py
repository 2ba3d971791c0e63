"""A tab's output format (text, any JSON object, a JSON schema): checked, loaded from a file,
described, and read as a request's ResponseFormat (app/request/tab.py makes the request;
app/request/engine_input.py builds the grammar).

A chat's params keep the OpenAI-shaped `response_format` (readable, the schema itself, never
the grammar text): None is plain text, `{"type": "json_object"}` any JSON object,
`{"type": "json_schema", "json_schema": {"name": …, "schema": {…}, "strict": True}}` one
schema. The grammar is built only at submit (engine.public's builders).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jsonschema import SchemaError, validators

from engine.public import GrammarError

from .chat_request import ResponseFormat
from .engine_input import format_grammar

JSON_OBJECT: dict[str, Any] = {"type": "json_object"}
# a tab's params beyond the engine's sampling settings: its output format, the MCP
# servers whose tools it offers with its tool_choice (app.tool_runner), and a reasoning
# model's thinking (app/reasoning/setting.py), the context overflow policy
# (app/request/overflow.py)
APP_KEYS = frozenset({"response_format", "mcp_servers", "tool_choice", "reasoning",
                      "context_overflow"})
MAX_SCHEMA_FILE_BYTES = 1_000_000


class OutputFormatError(ValueError):
    """The output format cannot be used; the message says why (shown in the tab)."""


def schema_format(schema: Any, name: str = "schema") -> dict[str, Any]:
    """`response_format` for one JSON schema, after checking it is a valid schema."""
    check_schema(schema)
    return {"type": "json_schema",
            "json_schema": {"name": name or "schema", "schema": schema, "strict": True}}


def load_schema_file(path: str | Path) -> dict[str, Any]:
    """`response_format` for the JSON schema in a file; OutputFormatError naming the file
    and the problem (missing, unreadable, not JSON, not a valid schema)."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_SCHEMA_FILE_BYTES:
            raise OutputFormatError(f"{p.name}: the file is larger than "
                                    f"{MAX_SCHEMA_FILE_BYTES // 1000} kB")
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise OutputFormatError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise OutputFormatError(f"{p.name}: cannot be read ({exc})") from None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OutputFormatError(f"{p.name} is not JSON: {exc}") from None
    try:
        return schema_format(schema, p.stem)
    except OutputFormatError as exc:
        raise OutputFormatError(f"{p.name}: {exc}") from None


def check_schema(schema: Any) -> None:
    """OutputFormatError unless `schema` is a JSON schema (an object, valid for its draft)."""
    if not isinstance(schema, Mapping):
        raise OutputFormatError("a JSON schema must be a JSON object, "
                                f"not {type(schema).__name__}")
    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        raise OutputFormatError(f"not a valid JSON schema: {exc.message}"
                                + (f" (at {where})" if where else "")) from None


def describe(response_format: Mapping[str, Any] | None) -> str:
    """A short label: "Text", "JSON", "JSON schema: name"."""
    kind = (response_format or {}).get("type", "text")
    if kind == "json_object":
        return "JSON"
    if kind == "json_schema":
        name = (response_format or {}).get("json_schema", {}).get("name") or "schema"
        return f"JSON schema: {name}"
    return "Text"


def response_format_of(response_format: Mapping[str, Any] | None) -> ResponseFormat | None:
    """A tab's `response_format` as a request's (None: text); OutputFormatError if it
    cannot be used (a hand-edited settings file, not a valid schema)."""
    if not response_format:
        return None
    if not isinstance(response_format, Mapping):
        raise OutputFormatError("the output format is not an object")
    kind = response_format.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return ResponseFormat("json_object", raw=response_format)
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        check_schema(schema)
        assert isinstance(spec, Mapping)  # check_schema refused anything else
        return ResponseFormat("json_schema", schema, strict=bool(spec.get("strict", True)),
                              raw=response_format)
    raise OutputFormatError(f"unknown output format type {kind!r}")


def grammar_of(response_format: Mapping[str, Any] | None) -> str | None:
    """The engine's grammar for a tab's `response_format` (None: text), built by
    app.request.engine_input; OutputFormatError if it cannot be used (a hand-edited
    settings file, a schema the matcher refuses)."""
    fmt = response_format_of(response_format)
    try:
        return format_grammar(fmt)
    except GrammarError as exc:
        raise OutputFormatError(f"the JSON schema cannot be enforced: {exc}") from None
