"""Goodput as `vllm bench serve --goodput` defines it: completed requests per second that met
every given limit (TTFT, TPOT = (E2E − TTFT) / (tokens − 1), E2E); a request with one token
has TPOT 0, as there. app.simulator.workload.summarize stays as it is; this rides alongside."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.simulator.workload import RequestResult

DONE_EXCLUDES = (None, "cancelled", "error", "shutdown")  # as summarize's "completed"


@dataclass(frozen=True, slots=True)
class Slo:
    """Per-request limits in seconds; None = not limited."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"the {name[:-2].upper()} limit must be above 0 s")

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.ttft_s, self.tpot_s, self.e2e_s))

    def met_by(self, r: RequestResult) -> bool:
        """Only for completed requests (a failed one never counts as good)."""
        checks = ((self.ttft_s, r.ttft_s), (self.tpot_s, r.tpot_s or 0.0),
                  (self.e2e_s, r.e2e_s))
        return all(value is not None and value <= limit
                   for limit, value in checks if limit is not None)

    def describe(self) -> str:
        parts = [f"{name} ≤ {v * 1000:g} ms" for name, v in
                 (("TTFT", self.ttft_s), ("TPOT", self.tpot_s), ("E2E", self.e2e_s))
                 if v is not None]
        return ", ".join(parts)

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)


def goodput(results: Sequence[RequestResult], duration_s: float, slo: Slo) -> dict[str, Any]:
    """The summary's goodput keys: `goodput` (req/s, None without limits), `slo` (the limits)
    and `slo_met` (how many completed requests met them all)."""
    if not slo.any:
        return {"goodput": None, "slo": slo.to_dict(), "slo_met": None}
    met = sum(slo.met_by(r) for r in results if r.finish_reason not in DONE_EXCLUDES)
    return {"goodput": met / duration_s if duration_s > 0 else 0.0, "slo": slo.to_dict(),
            "slo_met": met}
