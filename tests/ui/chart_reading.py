"""What the stats and simulator charts draw, read from their pyqtgraph items (tests only:
the product widgets keep no hooks for tests)."""

from __future__ import annotations

from typing import Any


def point_counts(charts: Any) -> dict[str, int]:
    """How many points each curve of a StatsCharts holds."""
    counts = {}
    for key, curve in charts.curves.items():
        data = curve.getData() if hasattr(curve, "getData") else (None, None)
        counts[key] = 0 if data[0] is None else len(data[0])
    return counts


def limits_drawn(summary: Any) -> dict[str, float]:
    """The limit lines a simulator SummaryView shows now: {"ttft_s": 2.5, ...}."""
    return {k: float(line.value()) for k, line in summary.limit_lines.items()
            if line.isVisible()}


def bar_heights(summary: Any) -> tuple[list[float], list[float]]:
    """(TTFT, E2E) bar heights on a simulator SummaryView's chart."""
    ttft = summary.ttft_bars.opts.get("height")
    e2e = summary.e2e_bars.opts.get("height")
    return ([float(v) for v in (ttft if ttft is not None else [])],
            [float(v) for v in (e2e if e2e is not None else [])])
