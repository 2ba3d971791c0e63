"""Side-by-side comparison of saved simulator runs (e.g. the same workload against two
servers): one table row per metric, one column per run. Qt-free (ui/history/compare_view.py
shows it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from app.storage import LoadedSimRun


def _ms(dist: str, pct: str) -> Callable[[dict[str, Any]], str]:
    def cell(s: dict[str, Any]) -> str:
        d = s.get(dist) or {}
        return f"{d[pct] * 1000:.0f} ms" if d.get("n") else "–"
    return cell


def _goodput(s: dict[str, Any]) -> str:
    if s.get("goodput") is None:
        return "–"
    return f"{s['goodput']:.2f} req/s ({s.get('slo_met')} of {s.get('completed')})"


def _limits(s: dict[str, Any]) -> str:
    slo = s.get("slo") or {}
    parts = [f"{name} ≤ {slo[key] * 1000:g} ms" for name, key in
             (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2E", "e2e_s")) if slo.get(key)]
    return ", ".join(parts) or "–"


METRICS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("target", lambda s: str(s.get("target") or "local engine")),
    ("requests", lambda s: str(s.get("requests", "–"))),
    ("completed", lambda s: str(s.get("completed", "–"))),
    ("failed", lambda s: str(s.get("failed", "–"))),
    ("duration", lambda s: f"{s['duration_s']:.1f} s" if "duration_s" in s else "–"),
    ("requests/s", lambda s: f"{s.get('request_throughput', 0.0):.2f}"),
    ("output tok/s", lambda s: f"{s.get('output_throughput', 0.0):.1f}"),
    ("TTFT p50", _ms("ttft_s", "median")),
    ("TTFT p90", _ms("ttft_s", "p90")),
    ("TPOT p50", _ms("tpot_s", "median")),
    ("TPOT p90", _ms("tpot_s", "p90")),
    ("E2E p50", _ms("e2e_s", "median")),
    ("E2E p90", _ms("e2e_s", "p90")),
    ("goodput", _goodput),
    ("limits", _limits),
]


def comparison_table(runs: Sequence[LoadedSimRun]) -> tuple[list[str], list[list[str]]]:
    """(metric names, rows): rows[i][j] is metric i of run j ("–" where a run lacks it)."""
    summaries = [r.run.summary or {} for r in runs]
    return [name for name, _ in METRICS], [[cell(s) for s in summaries]
                                           for _, cell in METRICS]


def latencies(loaded: LoadedSimRun, key: str = "e2e") -> list[float]:
    """One run's per-request latencies (`e2e` or `ttft`, from the saved summary) sorted
    ascending, completed requests only: overlaid for several runs they compare as
    distributions, whatever order the requests ran in."""
    values = (loaded.run.summary or {}).get(f"{key}_by_request") or []
    results = sorted(loaded.results, key=lambda r: r.seq)
    if len(results) == len(values):  # drop failed and cancelled requests
        values = [v for v, r in zip(values, results, strict=True)
                  if r.finish_reason not in (None, "cancelled", "error", "shutdown")]
    return sorted(float(v) for v in values if isinstance(v, int | float))
