"""The end-of-run summary: counts, throughput, latency percentiles, and a per-request
latency chart (pyqtgraph, styled like the stats panel's charts)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..chart_look import style_plot
from ..reflow import ReflowGrid
from ..stats.charts import nice_ceiling
from ..theme import is_dark

LATENCIES = (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"), ("e2e_s", "E2E"),
             # a reasoning model's first answer token (its thinking done); runs saved
             # before #49 have none
             ("ttfat_s", "TTFAT"))
PERCENTILES = (("median", "p50"), ("p90", "p90"), ("p99", "p99"))
COUNTS = (("requests", "requests"), ("completed", "completed"), ("cancelled", "cancelled"),
          ("failed", "failed"))
E2E_COLOUR = "#aecbfa"
TTFT_COLOUR = "#1a73e8"
CHART_TITLE = (f"Latency per request &nbsp; <span style='color:{E2E_COLOUR}'>■</span> E2E"
               f" &nbsp; <span style='color:{TTFT_COLOUR}'>■</span> TTFT")
LIMIT_COLOUR = "#d93025"  # the E2E limit: red, apart from both bars


def _duration(seconds: float) -> str:
    """ms below a second (where serving latencies usually are), else seconds."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _heights(values: Sequence[float | None]) -> np.ndarray:
    return np.array([v if v is not None else 0.0 for v in values], dtype=float)


class SummaryView(QWidget):
    """`values[key]` are the number labels (counts, throughput, "<metric>_<pct>")."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.values: dict[str, QLabel] = {}
        self.summary: Mapping[str, Any] | None = None
        self.heading = QLabel("The summary appears here when a run ends.")
        self.heading.setObjectName("simSummaryHeading")
        self.heading.setWordWrap(True)
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("Save this run as JSON (settings, summary, every "
                                      "result) or its results as CSV")
        self.export_button.setEnabled(False)
        top = QHBoxLayout()
        top.addWidget(self.heading, 1)
        top.addWidget(self.export_button)

        numbers_box = QWidget()
        numbers = QVBoxLayout(numbers_box)
        numbers.setContentsMargins(0, 0, 0, 0)
        numbers.addWidget(self._group("Requests", [(k, t, "") for k, t in COUNTS]))
        numbers.addWidget(self._group("Throughput", [
            ("request_throughput", "requests/s", "completed requests over the run's wall time"),
            ("output_throughput", "output tokens/s", "every generated token over wall time"),
            ("total_output_tokens", "output tokens", ""),
            ("duration_s", "duration", "first send to last request's end"),
            ("goodput", "goodput (req/s)", "completed requests per second that met every "
                                           "limit (TTFT, TPOT, E2E), as vllm bench serve's "
                                           "--goodput; – without limits"),
        ]))
        numbers.addWidget(self._latency_group())
        numbers.addStretch(1)
        self.chart = self._chart()
        # side by side when there is room, the chart below the numbers in a narrow dock
        row = ReflowGrid([numbers_box, self.chart], column_width=250, max_columns=2)
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        col.addLayout(top)
        col.addWidget(row, 1)

    def _group(self, title: str, fields: list[tuple[str, str, str]]) -> QGroupBox:
        box = QGroupBox(title)
        grid = QGridLayout(box)
        grid.setContentsMargins(6, 4, 6, 4)
        grid.setVerticalSpacing(1)
        for i, (key, label, tip) in enumerate(fields):
            name = QLabel(label)
            grid.addWidget(name, i, 0)
            grid.addWidget(self._value(key, tip), i, 1)
            name.setToolTip(tip)
        return box

    def _latency_group(self) -> QGroupBox:
        box = QGroupBox("Latency (completed requests)")
        grid = QGridLayout(box)
        grid.setContentsMargins(6, 4, 6, 4)
        grid.setVerticalSpacing(1)
        grid.setHorizontalSpacing(10)
        for j, (_, head) in enumerate(PERCENTILES, start=1):
            grid.addWidget(QLabel(head), 0, j, Qt.AlignmentFlag.AlignRight)
        for i, (metric, name) in enumerate(LATENCIES, start=1):
            label = QLabel(name)
            if metric == "ttfat_s":
                label.setToolTip("time to first answer token: a reasoning model's first "
                                 "token after its thinking (– for models that do not think)")
            grid.addWidget(label, i, 0)
            for j, (_, head) in enumerate(PERCENTILES, start=1):
                grid.addWidget(self._value(f"{metric}_{head}", ""), i, j)
        return box

    def _value(self, key: str, tip: str) -> QLabel:
        value = QLabel("–")
        value.setObjectName(f"sim_{key}")
        value.setAlignment(Qt.AlignmentFlag.AlignRight)
        value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        value.setToolTip(tip)
        self.values[key] = value
        return value

    def _chart(self) -> pg.PlotWidget:
        widget = pg.PlotWidget(background="w")
        widget.setMinimumSize(220, 160)
        item = widget.getPlotItem()
        # the key in the title, above the bars: a legend inside the plot covered bar 1
        item.setTitle(CHART_TITLE, size="9pt", color="#3c4043")
        item.setMenuEnabled(False)
        item.setMouseEnabled(x=False, y=False)
        item.hideButtons()
        item.showGrid(x=False, y=True, alpha=0.15)
        for name in ("left", "bottom"):
            item.getAxis(name).setTextPen("#5f6368")
            item.getAxis(name).setPen("#c0c4c8")
        item.getAxis("bottom").setLabel("request #", color="#5f6368")
        item.getAxis("left").setLabel("seconds", color="#5f6368")
        self.e2e_bars = pg.BarGraphItem(x=[], height=[], width=0.8,
                                        brush=E2E_COLOUR, pen=pg.mkPen(None))
        self.ttft_bars = pg.BarGraphItem(x=[], height=[], width=0.5,
                                         brush=TTFT_COLOUR, pen=pg.mkPen(None))
        item.addItem(self.e2e_bars)
        item.addItem(self.ttft_bars)
        # the run's TTFT and E2E limits as dashed lines (hidden without limits)
        self.limit_lines: dict[str, pg.InfiniteLine] = {}
        for key, colour, label in (("ttft_s", TTFT_COLOUR, "TTFT limit"),
                                   ("e2e_s", LIMIT_COLOUR, "E2E limit")):
            line = pg.InfiniteLine(angle=0, movable=False, label=label,
                                   pen=pg.mkPen(colour, width=1.5,
                                                style=Qt.PenStyle.DashLine),
                                   labelOpts={"position": 0.9, "color": colour,
                                              "anchors": [(1, 1), (1, 1)]})
            line.setVisible(False)
            item.addItem(line, ignoreBounds=True)
            self.limit_lines[key] = line
        style_plot(widget, is_dark())
        item.setXRange(0.5, 10.5, padding=0)  # whole-number ticks before the first run
        item.setYRange(0, 1, padding=0)
        return widget

    # -- showing --------------------------------------------------------------------------
    def clear(self, heading: str = "Running …") -> None:
        self.summary = None
        self.heading.setText(heading)
        for label in self.values.values():
            label.setText("–")
        self._plot([], [])
        self.export_button.setEnabled(False)

    def show_summary(self, summary: Mapping[str, Any], title: str = "") -> None:
        self.summary = summary
        stopped = " (stopped early)" if summary.get("stopped") else ""
        self.heading.setText(f"{title}{stopped}" if title else f"Finished{stopped}")
        for key, _ in COUNTS:
            self.values[key].setText(str(summary[key]))
        self.values["request_throughput"].setText(f"{summary['request_throughput']:.2f}")
        self.values["output_throughput"].setText(f"{summary['output_throughput']:.1f}")
        self.values["total_output_tokens"].setText(str(summary["total_output_tokens"]))
        self.values["duration_s"].setText(f"{summary['duration_s']:.1f} s")
        goodput = summary.get("goodput")
        self.values["goodput"].setText(
            "–" if goodput is None else
            f"{goodput:.2f} ({summary.get('slo_met')} of {summary['completed']} met)")
        for metric, _ in LATENCIES:
            dist = summary.get(metric) or {"n": 0}
            for key, head in PERCENTILES:
                self.values[f"{metric}_{head}"].setText(_duration(dist[key]) if dist["n"] else "–")
        self._plot(summary.get("ttft_by_request") or [], summary.get("e2e_by_request") or [],
                   summary.get("slo") or {})
        self.export_button.setEnabled(True)

    def _plot(self, ttft: Sequence[float | None], e2e: Sequence[float | None],
              slo: Mapping[str, float | None] | None = None) -> None:
        n = max(len(ttft), len(e2e))
        x = np.arange(1, n + 1, dtype=float)
        e2e_h, ttft_h = _heights(e2e), _heights(ttft)
        self.e2e_bars.setOpts(x=x[:len(e2e_h)], height=e2e_h)
        self.ttft_bars.setOpts(x=x[:len(ttft_h)], height=ttft_h)
        item = self.chart.getPlotItem()
        item.setXRange(0.5, max(10, n) + 0.5, padding=0)
        limits = {k: v for k, v in (slo or {}).items() if k in self.limit_lines and v}
        for key, line in self.limit_lines.items():
            line.setVisible(key in limits)
            if key in limits:
                line.setPos(float(limits[key]))
        top = max([*e2e_h, *ttft_h, *limits.values(), 0.0])
        item.setYRange(0, nice_ceiling(top * 1.05) if top > 1 else _small_ceiling(top),
                       padding=0)


def _small_ceiling(value: float) -> float:
    """nice_ceiling stops at 1; sub-second runs get 0.1, 0.2, 0.5 ... steps too."""
    if value <= 0:
        return 1.0
    return nice_ceiling(value * 1.05 * 1000) / 1000
