"""Grammars that constrain a request's output (issue #30): what a request asks for, as text.

A grammar is llguidance's own text (JSON with a JSON schema, Lark or a regex inside), made
by the functions here from what an API request or a tab asks for. The engine matches it per
row (a token mask every step); this module only builds and checks it, so it imports no MLX
and the app may use it (engine.public).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llguidance import LLMatcher

from .schema_check import schema_problem

MAX_GRAMMAR_CHARS = 1_000_000  # a schema or grammar larger than this is refused


class GrammarError(ValueError):
    """The grammar (or schema) cannot be used; the message says where and why."""


def json_schema_grammar(schema: Mapping[str, Any], *, strict: bool = True) -> str:
    """Output that is one JSON value matching `schema`. `strict` keeps the JSON compact
    (no free whitespace between tokens: a small model cannot wander in it)."""
    if not isinstance(schema, Mapping):
        raise GrammarError("a JSON schema must be an object")
    problem = schema_problem(schema)  # what llguidance would take badly (schema_check.py)
    if problem:
        raise GrammarError(problem)
    defaults = {"whitespace_flexible": False} if strict else None
    try:
        grammar = LLMatcher.grammar_from_json_schema(dict(schema), defaults=defaults)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # llguidance's own refusals are plain ValueErrors: still the schema's fault
        raise GrammarError(f"the schema cannot be used: {exc}") from None
    return checked(grammar)


def json_object_grammar() -> str:
    """Output that is any one JSON object (OpenAI's `response_format: json_object`)."""
    return json_schema_grammar({"type": "object"})


def lark_grammar(text: str) -> str:
    """Output matching a Lark grammar (llguidance's dialect, `start` is the top rule)."""
    return checked(LLMatcher.grammar_from_lark(text))


def regex_grammar(pattern: str) -> str:
    """Output matching a regular expression, whole."""
    return checked(LLMatcher.grammar_from_regex(pattern))


def checked(grammar: str) -> str:
    """`grammar` itself, if llguidance can use it; else GrammarError naming the problem."""
    if not isinstance(grammar, str):
        raise GrammarError(f"grammar must be text, got {type(grammar).__name__}")
    if len(grammar) > MAX_GRAMMAR_CHARS:
        raise GrammarError(f"grammar is {len(grammar)} characters; at most "
                           f"{MAX_GRAMMAR_CHARS} are taken")
    problem = LLMatcher.validate_grammar(grammar)
    if problem:
        raise GrammarError(f"grammar cannot be used: {problem.strip()}")
    return grammar
