"""History → select two or more simulation runs → Compare: their summaries side by side and
their latencies overlaid (each run's sorted E2E solid and TTFT dashed, one colour per run)."""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QHeaderView,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.simulator.compare import comparison_table, latencies
from app.storage import LoadedSimRun

from ..chart_look import style_plot
from ..theme import is_dark

COLOURS = ("#1a73e8", "#d93025", "#188038", "#f9ab00", "#9334e6", "#12b5cb")


class CompareRunsDialog(QDialog):
    def __init__(self, runs: Sequence[LoadedSimRun], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("compareRuns")
        self.setWindowTitle(f"Compare {len(runs)} simulation runs")
        self.resize(900, 620)
        self.runs = list(runs)
        names, rows = comparison_table(self.runs)
        self.table = QTableWidget(len(names), len(self.runs))
        self.table.setObjectName("compareTable")
        self.table.setVerticalHeaderLabels(names)
        self.table.setHorizontalHeaderLabels([_short(r) for r in self.runs])
        for j, loaded in enumerate(self.runs):
            self.table.horizontalHeaderItem(j).setToolTip(loaded.run.title)
        for i, row in enumerate(rows):
            for j, text in enumerate(row):
                item = QTableWidgetItem(text)
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                self.table.setItem(i, j, item)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.chart = self._chart()
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.chart)
        split.setSizes([330, 290])
        col = QVBoxLayout(self)
        col.addWidget(split)

    def _chart(self) -> pg.PlotWidget:
        widget = pg.PlotWidget(background="w")
        item = widget.getPlotItem()
        item.setTitle("Latency per request, sorted (E2E solid, TTFT dashed)", size="9pt")
        item.setMenuEnabled(False)
        item.showGrid(x=False, y=True, alpha=0.15)
        item.getAxis("bottom").setLabel("requests, fastest first")
        item.getAxis("left").setLabel("seconds")
        item.addLegend(offset=(8, 4), labelTextSize="8pt")
        self.curves: list[tuple[pg.PlotDataItem, pg.PlotDataItem]] = []
        for j, loaded in enumerate(self.runs):
            colour = COLOURS[j % len(COLOURS)]
            e2e, ttft = latencies(loaded, "e2e"), latencies(loaded, "ttft")
            e2e_curve = item.plot(list(range(1, len(e2e) + 1)), e2e,
                                  pen=pg.mkPen(colour, width=2), name=_short(loaded))
            ttft_curve = item.plot(list(range(1, len(ttft) + 1)), ttft,
                                   pen=pg.mkPen(colour, width=1.5, style=Qt.PenStyle.DashLine))
            self.curves.append((e2e_curve, ttft_curve))
        style_plot(widget, is_dark())
        return widget


def _short(loaded: LoadedSimRun) -> str:
    """A column heading: the target, else the title (started time in the tooltip)."""
    target = (loaded.run.summary or {}).get("target")
    return f"{target or 'local engine'} · {loaded.run.started_at[11:19]}"
