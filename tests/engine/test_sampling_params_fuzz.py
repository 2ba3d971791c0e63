"""SamplingParams with random values (hypothesis): every valid value of every field builds
(and survives to_dict/from_dict), and anything else raises ValueError naming the field,
never another exception type."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.public import (
    SamplingParams,
    json_object_grammar,
    json_schema_grammar,
    lark_grammar,
    regex_grammar,
)

FIELDS = [f.name for f in dataclasses.fields(SamplingParams)]
EXAMPLES = settings(max_examples=200, deadline=None, database=None, derandomize=True)

# Any text, lone surrogates included
TEXT = st.text(st.characters(exclude_categories=()), max_size=300)
HUGE = st.sampled_from([10**400, -(10**400), 2**63, -(2**63) - 1, 2**64])
ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | HUGE | st.floats() | TEXT | st.binary(),
    lambda inner: st.lists(inner, max_size=20) | st.tuples(inner, inner)
    | st.dictionaries(TEXT, inner, max_size=3) | st.frozensets(st.integers(), max_size=3),
    max_leaves=20)

STOP_TEXT = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=256)
VALID = {
    "temperature": st.floats(0, 1e6) | st.integers(0, 10**6),
    "top_p": st.floats(0, 1, exclude_min=True),
    "top_k": st.integers(0, 10**9),
    "min_p": st.floats(0, 1, exclude_max=True),
    "repetition_penalty": st.floats(0, 1e6, exclude_min=True),
    "repetition_context_size": st.integers(1, 10**9),
    "seed": st.none() | st.integers(0, 2**128),
    "max_tokens": st.integers(1, 10**12),
    "stop": STOP_TEXT | st.lists(STOP_TEXT, max_size=16) | st.tuples(STOP_TEXT),
    "logprobs": st.none() | st.integers(0, 20),
    "grammar": st.none() | st.sampled_from([
        json_object_grammar(), lark_grammar('start: "yes" | "no"'), regex_grammar("[0-9]+"),
        json_schema_grammar({"type": "object", "properties": {"n": {"type": "integer"}}})]),
}


def test_every_field_has_a_valid_strategy():
    assert set(VALID) == set(FIELDS)


@EXAMPLES
@given(st.fixed_dictionaries({}, optional=VALID))
def test_valid_values_build_and_round_trip(values: dict[str, Any]) -> None:
    params = SamplingParams(**values)
    again = SamplingParams.from_dict(params.to_dict())
    assert again == params
    assert isinstance(params.stop, tuple)


@EXAMPLES
@given(st.sampled_from(FIELDS), ANY)
def test_any_value_builds_or_raises_value_error_naming_the_field(name: str, value: Any):
    try:
        SamplingParams(**{name: value})
    except ValueError as exc:  # any other exception type fails the test
        assert str(exc).startswith(name), str(exc)


INVALID = {
    "temperature": st.floats(max_value=0, exclude_max=True) | st.sampled_from(
        [math.inf, math.nan, 10**400, "1", True, None]),
    "top_p": st.floats(1, exclude_min=True) | st.sampled_from([0, -0.5, math.nan, 10**400]),
    "top_k": st.integers(max_value=-1) | st.sampled_from([1.0, True, "3", None]),
    "min_p": st.floats(min_value=1) | st.sampled_from([-0.1, -(10**400), math.nan]),
    "repetition_penalty": st.floats(max_value=0) | st.sampled_from([-(10**400), math.inf]),
    "repetition_context_size": st.integers(max_value=0) | st.sampled_from([1.5, None]),
    "seed": st.integers(max_value=-1) | st.sampled_from([1.5, "7", True]),
    "max_tokens": st.integers(max_value=0) | st.sampled_from([1.0, False, None, "9"]),
    "stop": st.lists(STOP_TEXT, min_size=17, max_size=20) | st.sampled_from(
        ["", [""], ["x" * 257], [1], ["\ud800"], 5, None, {"a"}, b"x"]),
    "logprobs": st.integers(min_value=21) | st.integers(max_value=-1) | st.sampled_from(
        [True, 2.0, "2"]),
}


@EXAMPLES
@given(st.data())
def test_invalid_values_raise_value_error_naming_the_field(data) -> None:
    name = data.draw(st.sampled_from(sorted(INVALID)))
    value = data.draw(INVALID[name])
    with pytest.raises(ValueError) as caught:
        SamplingParams(**{name: value})
    assert str(caught.value).startswith(name)
