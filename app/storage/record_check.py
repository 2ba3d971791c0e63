"""Checking a record's fields against its declared types before it is built from an
import file, so a malformed value is refused naming the record and the field instead of
failing later as a raw TypeError, or being stored and breaking the app when read back."""

from __future__ import annotations

import dataclasses
import json
import reprlib
import types
import typing
from typing import Any

from engine.public import lone_surrogate

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # SQLite's integers (larger: OverflowError)


def check_fields(cls: type, data: dict[str, Any]) -> None:
    """Raise ValueError naming the record and the first field that is missing or of the
    wrong kind (`cls` is a Record dataclass; unknown fields are checked by the caller)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{_record(cls, data)}: field {f.name} is missing")
            continue
        problem = _problem(hints[f.name], data[f.name])
        if problem is not None:
            raise ValueError(f"{_record(cls, data)}: field {f.name} {problem} "
                             f"(got {reprlib.repr(data[f.name])})")


def field_problem(cls: type, name: str, value: Any) -> str | None:
    """What is wrong with `value` for field `name` of `cls` (None if it fits)."""
    return _problem(typing.get_type_hints(cls)[name], value)


def field_default(cls: type, name: str) -> Any:
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def _record(cls: type, data: dict[str, Any]) -> str:
    return f"{cls.TABLE} record {data.get('id', '?')}"  # type: ignore[attr-defined]


def _problem(hint: Any, value: Any) -> str | None:
    """None if `value` fits `hint`, else what it must be."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        problem = _problem(inner[0], value) if len(inner) == 1 else None
        if problem is None or not problem.startswith("must be"):
            return problem
        return f"{problem} or null"
    if origin is typing.Literal:
        return None if value in args else f"must be one of {', '.join(map(repr, args))}"
    if hint is str:
        if not isinstance(value, str):
            return "must be text"
        bad = lone_surrogate(value)
        return None if bad is None else f"is not valid text: it {bad}"
    if hint is bool:
        return None if isinstance(value, bool) else "must be true or false"
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            return "must be an integer"
        return None if INT64_MIN <= value <= INT64_MAX else "must fit in 64 bits"
    if hint is float:
        return None if isinstance(value, int | float) and not isinstance(value, bool) \
            else "must be a number"
    if origin is list:
        if not isinstance(value, list) or not all(_problem(args[0], v) is None for v in value):
            return f"must be a list of {'integers' if args[0] is int else 'values'}"
        return None
    if origin is dict:
        if not isinstance(value, dict):
            return "must be an object"
        return _json_text_problem(value)
    return None


def _json_text_problem(value: Any) -> str | None:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds text that is not valid Unicode (a lone surrogate: {exc.reason})"
    except (TypeError, ValueError) as exc:
        return f"cannot be stored ({exc})"
    return None
