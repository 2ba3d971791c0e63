"""What a simulation run does: one validated, JSON-friendly dataclass (saved with the run)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..plural import counted
from .goodput import Slo
from .templates import PromptSet, default_prompt_set

ARRIVALS = ("uniform", "poisson", "burst")
SAMPLING_MODES = ("fixed", "random")


class SimConfigError(ValueError):
    """A setting is out of range; the message names it (shown next to the form)."""


def _default_templates() -> list[str]:
    return list(default_prompt_set().templates)


def _default_topics() -> list[str]:
    return list(default_prompt_set().topics)


@dataclass(slots=True)
class SimConfig:
    templates: list[str] = field(default_factory=_default_templates)
    topics: list[str] = field(default_factory=_default_topics)
    arrival: str = "uniform"  # uniform | poisson | burst
    uniform_low_s: float = 0.5  # LLMEval's server simulation waits 0.5-2.0 s
    uniform_high_s: float = 2.0
    rate: float = 1.0  # poisson: requests per second
    burst_size: int = 4  # burst: this many at once ...
    burst_every_s: float = 5.0  # ... every this many seconds
    num_requests: int | None = 20  # stop sending after this many (None: no limit) ...
    duration_s: float | None = None  # ... or after this long (None: no limit)
    max_tokens_min: int = 32
    max_tokens_max: int = 128
    sampling: str = "fixed"  # fixed | random (drawn per request)
    temperature: float = 0.7
    top_p: float = 0.95
    temperature_max: float = 1.2  # random: temperature in [temperature, temperature_max]
    top_p_min: float = 0.8  # random: top_p in [top_p_min, top_p]
    cancel_probability: float = 0.0
    max_concurrent: int | None = None  # engine limit during the run (None: leave as is)
    seed: int | None = None  # None: a fresh run every time
    # Service-level limits for goodput (app/simulator/goodput.py); None = not limited.
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    slo_e2e_s: float | None = None

    def validate(self) -> SimConfig:
        """Raise SimConfigError naming the first bad setting; return self when all is well."""
        def need(ok: bool, message: str) -> None:
            if not ok:
                raise SimConfigError(message)

        for name in ("uniform_low_s", "uniform_high_s", "rate", "burst_every_s",
                     "temperature", "top_p", "temperature_max", "top_p_min",
                     "cancel_probability"):  # NaN passes no check below; infinity hangs
            value = getattr(self, name)
            need(isinstance(value, int | float) and not isinstance(value, bool)
                 and math.isfinite(value), f"{name} must be a finite number, got {value!r}.")
        for name in ("burst_size", "num_requests", "max_tokens_min", "max_tokens_max",
                     "max_concurrent", "seed"):
            value = getattr(self, name)
            need(value is None and name in ("num_requests", "max_concurrent", "seed")
                 or isinstance(value, int) and not isinstance(value, bool),
                 f"{name} must be a whole number, got {value!r}.")
        need(isinstance(self.templates, list) and isinstance(self.topics, list)
             and all(isinstance(t, str) for t in [*self.templates, *self.topics]),
             "Templates and topics must be lists of text.")
        templates = [t for t in self.templates if t.strip()]
        need(bool(templates), "Add at least one prompt template.")
        need(self.arrival in ARRIVALS, f"Arrival must be one of {', '.join(ARRIVALS)}.")
        need(0 <= self.uniform_low_s <= self.uniform_high_s,
             "Uniform gaps need 0 ≤ shortest ≤ longest.")
        need(self.rate > 0, "The Poisson rate must be above 0 requests/s.")
        need(self.burst_size >= 1, "A burst needs at least 1 request.")
        need(self.burst_every_s >= 0, "The time between bursts cannot be negative.")
        need(self.num_requests is not None or self.duration_s is not None,
             "Set a number of requests, a duration, or both.")
        need(self.num_requests is None or self.num_requests >= 1,
             "The number of requests must be at least 1.")
        need(self.duration_s is None or self.duration_s > 0, "The duration must be above 0 s.")
        need(1 <= self.max_tokens_min <= self.max_tokens_max,
             "Max tokens needs 1 ≤ lowest ≤ highest.")
        need(self.sampling in SAMPLING_MODES, "Sampling must be fixed or random.")
        need(self.temperature >= 0, "Temperature cannot be negative.")
        need(0 < self.top_p <= 1, "Top-p must be in (0, 1].")
        if self.sampling == "random":
            need(self.temperature <= self.temperature_max,
                 "Random temperature needs lowest ≤ highest.")
            need(0 < self.top_p_min <= self.top_p, "Random top-p needs 0 < lowest ≤ highest.")
        need(0 <= self.cancel_probability <= 1, "Cancel probability must be in [0, 1].")
        need(self.max_concurrent is None or self.max_concurrent >= 1,
             "The concurrency limit must be at least 1.")
        for name, label in (("slo_ttft_s", "TTFT"), ("slo_tpot_s", "TPOT"),
                            ("slo_e2e_s", "E2E")):
            value = getattr(self, name)
            need(value is None or isinstance(value, int | float) and not isinstance(value, bool)
                 and math.isfinite(value) and value > 0,
                 f"The {label} limit must be a finite number above 0 s, got {value!r}.")
        return self

    def slo(self) -> Slo:
        return Slo(self.slo_ttft_s, self.slo_tpot_s, self.slo_e2e_s)

    # -- what the run draws from ----------------------------------------------------------
    def prompt_set(self) -> PromptSet:
        return PromptSet(tuple(t for t in self.templates if t.strip()),
                         tuple(t for t in self.topics if t.strip()))

    def gaps(self, seed: int | None) -> Iterator[float]:
        from app.simulator.workload import burst_gaps, gamma_gaps, uniform_gaps

        if self.arrival == "poisson":
            return gamma_gaps(self.rate, 1.0, seed)
        if self.arrival == "burst":
            return burst_gaps(self.burst_size, self.burst_every_s)
        return uniform_gaps(self.uniform_low_s, self.uniform_high_s, seed)

    def sampling_for(self, rng: random.Random) -> dict[str, Any]:
        """One request's sampling settings (a dict SamplingParams.from_dict accepts)."""
        max_tokens = rng.randint(self.max_tokens_min, self.max_tokens_max)
        if self.sampling == "random":
            return {"max_tokens": max_tokens,
                    "temperature": rng.uniform(self.temperature, self.temperature_max),
                    "top_p": rng.uniform(self.top_p_min, self.top_p)}
        return {"max_tokens": max_tokens, "temperature": self.temperature, "top_p": self.top_p}

    def describe(self) -> str:
        """One line for titles and the CLI, e.g. "20 requests, Poisson 2.0/s"."""
        if self.arrival == "poisson":
            how = f"Poisson {self.rate:g}/s"
        elif self.arrival == "burst":
            how = f"bursts of {self.burst_size} every {self.burst_every_s:g} s"
        else:
            how = f"every {self.uniform_low_s:g}–{self.uniform_high_s:g} s"
        amount = []
        if self.num_requests is not None:
            amount.append(counted(self.num_requests, "request"))
        if self.duration_s is not None:
            amount.append(f"{self.duration_s:g} s")
        return f"{' / '.join(amount)}, {how}"

    # -- JSON -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SimConfig:
        """Refuse unknown keys (a typo must not silently fall back to a default)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SimConfigError(f"Unknown simulator setting(s): {', '.join(unknown)}")
        # (a string is not turned into a list of its letters: validate() refuses it)
        return cls(**{k: (list(v) if k in ("templates", "topics")
                          and isinstance(v, list | tuple) else v)
                      for k, v in data.items()})
