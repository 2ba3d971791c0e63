"""A tab's output format (text, any JSON object, a JSON schema): checked, and turned into what
a backend takes — a grammar for the local engine, `response_format` for a remote server.

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

from engine.public import GrammarError, json_object_grammar, json_schema_grammar

JSON_OBJECT: dict[str, Any] = {"type": "json_object"}
# a tab's params beyond the engine's sampling settings: its output format, and the MCP
# servers whose tools it offers with its tool_choice (app.tool_runner)
APP_KEYS = frozenset({"response_format", "mcp_servers", "tool_choice"})
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


def grammar_of(response_format: Mapping[str, Any] | None) -> str | None:
    """The engine's grammar for a `response_format` (None: text); OutputFormatError if it
    cannot be used (a hand-edited settings file, a schema the matcher refuses)."""
    if not response_format:
        return None
    if not isinstance(response_format, Mapping):
        raise OutputFormatError("the output format is not an object")
    kind = response_format.get("type")
    try:
        if kind in (None, "text"):
            return None
        if kind == "json_object":
            return json_object_grammar()
        if kind == "json_schema":
            spec = response_format.get("json_schema")
            schema = spec.get("schema") if isinstance(spec, Mapping) else None
            check_schema(schema)
            return json_schema_grammar(schema, strict=bool(spec.get("strict", True)))
    except GrammarError as exc:
        raise OutputFormatError(f"the JSON schema cannot be enforced: {exc}") from None
    raise OutputFormatError(f"unknown output format type {kind!r}")


def engine_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A tab's params as the engine takes them: `response_format` becomes `grammar`."""
    out = {k: v for k, v in params.items() if k not in APP_KEYS}
    grammar = grammar_of(params.get("response_format"))
    if grammar is not None:
        out["grammar"] = grammar
    return out


def remote_extras(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(sampling params, extra request body fields) for a remote server: the format goes
    as OpenAI's `response_format` (checked here first: a bad schema is never sent)."""
    sampling = {k: v for k, v in params.items() if k not in APP_KEYS}
    fmt = params.get("response_format")
    if not fmt or (isinstance(fmt, Mapping) and fmt.get("type") in (None, "text")):
        return sampling, {}
    grammar_of(fmt)  # same checks as for the local engine
    return sampling, {"response_format": dict(fmt)}
