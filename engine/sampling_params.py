"""Per-request sampling parameters, validated when built."""

from __future__ import annotations

import math
import reprlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .grammars import checked
from .text_check import lone_surrogate

# Bounds on stop strings (OpenAI's API allows 4): each one is searched for in every new
# piece of text, so thousands of them slow every token of the whole batch.
MAX_STOP_STRINGS = 16
MAX_STOP_LENGTH = 256

MAX_TOP_LOGPROBS = 20  # OpenAI's own limit on top_logprobs
MAX_FLOAT_INT = int(sys.float_info.max)  # the largest int float() takes


@dataclass(frozen=True, slots=True)
class SamplingParams:
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    min_p: float = 0.0
    repetition_penalty: float = 1.0  # 1 = off
    repetition_context_size: int = 20
    seed: int | None = None  # None = fresh randomness per request
    max_tokens: int = 256
    stop: tuple[str, ...] = field(default_factory=tuple)
    # Log-probabilities per generated token: None = none (free), 0 = the chosen token's,
    # n = also the n most likely alternatives (at most MAX_TOP_LOGPROBS)
    logprobs: int | None = None
    # Output constrained to a grammar (engine/grammars.py: a JSON schema, any JSON object,
    # Lark, a regex), matched per row; None = free text
    grammar: str | None = None

    def __post_init__(self) -> None:
        def number(name: str) -> float:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name} must be a number, got {value!r}")
            # an int beyond a float's range (10**400) is not finite either: float() of it
            # raises OverflowError, which would escape as the wrong type
            if isinstance(value, int) and abs(value) > MAX_FLOAT_INT or not math.isfinite(value):
                raise ValueError(f"{name} must be finite, got {reprlib.repr(value)}")
            return float(value)

        def integer(name: str, minimum: int) -> None:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
            if value < minimum:
                raise ValueError(f"{name} must be >= {minimum}, got {value}")

        if number("temperature") < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < number("top_p") <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        integer("top_k", 0)
        if not 0.0 <= number("min_p") < 1.0:
            raise ValueError(f"min_p must be in [0, 1), got {self.min_p}")
        if number("repetition_penalty") <= 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        integer("repetition_context_size", 1)
        integer("max_tokens", 1)
        if self.seed is not None:
            integer("seed", 0)
        if self.logprobs is not None:
            integer("logprobs", 0)
            if self.logprobs > MAX_TOP_LOGPROBS:
                raise ValueError(f"logprobs must be <= {MAX_TOP_LOGPROBS}, got {self.logprobs}")
        stop = self.stop
        if isinstance(stop, str):
            stop = (stop,)
        if not isinstance(stop, list | tuple):
            raise ValueError(f"stop must be a string or a list of strings, got {stop!r}")
        stop = tuple(stop)
        if len(stop) > MAX_STOP_STRINGS:
            raise ValueError(f"stop holds {len(stop)} strings; at most {MAX_STOP_STRINGS} "
                             "are allowed")
        for i, s in enumerate(stop):
            if not isinstance(s, str) or not s:
                raise ValueError(f"stop strings must be non-empty strings, got {s!r}")
            if len(s) > MAX_STOP_LENGTH:
                raise ValueError(f"stop[{i}] is {len(s)} characters long; at most "
                                 f"{MAX_STOP_LENGTH} are allowed")
            bad = lone_surrogate(s)
            if bad is not None:
                raise ValueError(f"stop[{i}] {bad}")
        object.__setattr__(self, "stop", stop)
        if self.grammar is not None:
            checked(self.grammar)  # GrammarError (a ValueError) names the problem

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SamplingParams:
        """Build from a plain mapping, refusing keys this class does not know."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown sampling field(s): {', '.join(unknown)} "
                f"(known: {', '.join(sorted(known))})"
            )
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)} | {"stop": list(self.stop)}

