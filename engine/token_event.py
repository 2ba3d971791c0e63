"""What the engine hands out for each request, tick by tick."""

from __future__ import annotations

from dataclasses import dataclass

from .stats import RequestStats


@dataclass(frozen=True, slots=True)
class TokenEvent:
    request_id: str
    token: int | None  # None on an event that only ends the request
    text: str  # text delta, safe to show (stop strings never leak)
    finish_reason: str | None = None  # stop | length | context | cancelled | error | shutdown
    error: str | None = None
    stats: RequestStats | None = None  # set on the final event
    # With SamplingParams.logprobs: the token's log-probability and the most likely
    # alternatives as (token id, log-probability), best first
    logprob: float | None = None
    top_logprobs: tuple[tuple[int, float], ...] | None = None
