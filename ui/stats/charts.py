"""Live time-series charts of the stats panel (pyqtgraph): the last few minutes of samples."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QGraphicsItem, QVBoxLayout, QWidget

from app.stats.model import ModelLoaded, Sample

from ..chart_look import style_plot
from ..reflow import ReflowGrid
from ..theme import is_dark

# key, title, colour
SERIES = (
    ("tokens_per_s", "Tokens/s (engine window)", "#1a73e8"),
    ("batch_size", "Batch size (sequences per decode tick)", "#188038"),
    ("queued", "Queue depth (waiting requests)", "#e37400"),
    ("step_ms", "Step time, ms · token budget (red)", "#9334e6"),
)
BUDGET_COLOUR = "#d93025"
SWITCH_COLOUR = "#80868b"  # the dashed line where another model was loaded
LABEL_GAP = 12.0  # px between two models' names (and the text item's own margins)
# Value axes have a fixed width and three labelled ticks (0, half, top): a label that grows
# ("50" -> "100") no longer relays the whole plot out, and redrawing an axis is mostly its
# text; a change of scale cost ~20 ms of UI thread for the four charts, now ~5 ms.
AXIS_WIDTH = 40


def _plot(title: str, history_s: float) -> pg.PlotWidget:
    widget = pg.PlotWidget(background="w")
    widget.setMinimumHeight(110)
    item = widget.getPlotItem()
    item.setTitle(title, size="9pt", color="#3c4043")
    item.setMenuEnabled(False)
    item.setMouseEnabled(x=False, y=False)
    item.hideButtons()
    item.showGrid(x=True, y=True, alpha=0.15)
    item.setXRange(-history_s, 0, padding=0)
    item.getViewBox().setLimits(yMin=0, minYRange=1)
    item.setYRange(0, 1, padding=0)
    for name in ("left", "bottom"):
        item.getAxis(name).setTextPen("#5f6368")
        item.getAxis(name).setPen("#c0c4c8")
    item.getAxis("bottom").setLabel("seconds ago", color="#5f6368")
    item.getAxis("left").setWidth(AXIS_WIDTH)
    set_value_ticks(item.getAxis("left"), 1.0)
    style_plot(widget, is_dark())
    _cache(item.titleLabel, item.getAxis("left"), item.getAxis("bottom"))
    return widget


def _cache(*items: QGraphicsItem) -> None:
    """Keep these rendered as pixmaps: text is what costs (~1.5 ms an axis per redraw on
    the CPU); they are drawn again only when their ticks change."""
    for graphics_item in items:
        graphics_item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)


def tick_label(value: float) -> str:
    """Short: 0.5, 20, 250, 2.5k, 1M (the axis is narrow)."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def set_value_ticks(axis: pg.AxisItem, top: float) -> None:
    axis.setTicks([[(v, tick_label(v)) for v in (0.0, top / 2, top)], []])


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 5 x 10^k at or above `value` (1 for nothing)."""
    if value <= 1.0:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(value))
    return next(m * scale for m in (1.0, 2.0, 5.0, 10.0) if value <= m * scale)


class StatsCharts(QWidget):
    """`curves[key]` holds each series; the step-time chart has the budget on a right axis."""

    def __init__(self, history_s: float, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.history_s = history_s
        self.span_s = 0.0  # the x axis shows the last span_s seconds
        self._tops: dict[str, float] = {}
        self.plots: dict[str, pg.PlotWidget] = {}
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.switch_lines: dict[str, list[pg.InfiniteLine]] = {}  # per chart, reused
        for key, title, colour in SERIES:
            plot = _plot(title, history_s)
            self.plots[key] = plot
            # width 1: Qt draws one-pixel lines on a fast path; 1.5 went through its
            # stroker and made a repaint of the four charts 15 ms instead of 5-8
            self.curves[key] = plot.getPlotItem().plot(
                pen=pg.mkPen(colour, width=1), connect="finite")
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        # 2 x 2 when the dock is wide, one column when it is narrow
        col.addWidget(ReflowGrid(list(self.plots.values()), column_width=260, max_columns=2))
        self.curves["budget"] = self._budget_curve(self.plots["step_ms"].getPlotItem())

    def _budget_curve(self, item: pg.PlotItem) -> pg.PlotCurveItem:
        box = pg.ViewBox()
        box.setMouseEnabled(x=False, y=False)
        box.setLimits(yMin=0)
        item.showAxis("right")
        item.scene().addItem(box)
        axis = item.getAxis("right")
        axis.linkToView(box)
        axis.setTextPen(BUDGET_COLOUR)
        axis.setPen("#c0c4c8")
        axis.setWidth(AXIS_WIDTH)
        set_value_ticks(axis, 1.0)
        _cache(axis)
        box.setXLink(item)
        main = item.getViewBox()

        def follow() -> None:
            box.setGeometry(main.sceneBoundingRect())

        main.sigResized.connect(follow)
        curve = pg.PlotCurveItem(pen=pg.mkPen(BUDGET_COLOUR, width=1,
                                              style=Qt.PenStyle.DashLine))
        box.addItem(curve)
        self._budget_box = box
        return curve

    def update_from(self, samples: Sequence[Sample], now: float,
                    loaded: Sequence[ModelLoaded] = ()) -> None:
        """The samples, and a dashed line (named on the first chart) where each model after
        the first sample was loaded."""
        if not samples:
            for curve in self.curves.values():
                curve.setData([], [])
            self._show_switches([], now)
            return
        self._show_switches([m for m in loaded if m.t > samples[0].t], now)
        x = np.fromiter((s.t - now for s in samples), float, len(samples))
        self._set_span(-float(x[0]))
        for key, _, _ in SERIES:
            y = np.fromiter((getattr(s, key) for s in samples), float, len(samples))
            self.curves[key].setData(x, y)
            self._set_top(key, self.plots[key].getPlotItem().getViewBox(), y)
        budget = np.fromiter((s.budget for s in samples), float, len(samples))
        self.curves["budget"].setData(x, budget)
        self._set_top("budget", self._budget_box, budget)

    def _show_switches(self, marks: Sequence[ModelLoaded], now: float) -> None:
        for i, (key, _, _) in enumerate(SERIES):
            lines = self.switch_lines.setdefault(key, [])
            while len(lines) < len(marks):
                line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(
                    SWITCH_COLOUR, width=1, style=Qt.PenStyle.DashLine),
                    label=" " if i == 0 else None,  # the text is set below
                    labelOpts={"position": 0.85, "color": SWITCH_COLOUR, "anchors":
                               [(1, 0), (1, 0)]})
                self.plots[key].getPlotItem().addItem(line, ignoreBounds=True)
                lines.append(line)
            for line, mark in zip(lines, marks, strict=False):
                line.setPos(mark.t - now)
                if getattr(line, "label", None) is not None:
                    short = mark.name.split(" (")[0].split(",")[0]
                    short = short.replace("{", "{{").replace("}", "}}")
                    line.label.format = f"{short} ▸"
                line.setToolTip(f"{mark.name} loaded at {mark.at}")
                line.show()
            for line in lines[len(marks):]:
                line.hide()
        self._drop_crowded_labels(self.switch_lines.get(SERIES[0][0], [])[:len(marks)])

    def _drop_crowded_labels(self, lines: Sequence[pg.InfiniteLine]) -> None:
        """One readable name per model: from the newest load back, a label (right-aligned
        on its line) is shown only where it clears the one after it; a line without its
        name keeps it in its tooltip. Three loads within a few minutes piled up three."""
        box = self.plots[SERIES[0][0]].getPlotItem().getViewBox()
        room_right = float("inf")  # the left edge of the label shown after this one
        for line in sorted(lines, key=lambda ln: ln.value(), reverse=True):
            label = line.label
            x = box.mapViewToScene(pg.Point(line.value(), 0)).x()
            width = QFontMetricsF(label.textItem.font()).horizontalAdvance(
                label.format.replace("{{", "{").replace("}}", "}")) + LABEL_GAP
            shown = x <= room_right
            label.setVisible(shown)
            if shown:
                label.valueChanged()  # its text (a hidden label skips the update)
                room_right = x - width

    def _set_top(self, key: str, box: pg.ViewBox, y: np.ndarray) -> None:
        """Y from 0 to a round number above the data, changed only when that number does:
        an axis whose ticks stay put is not redrawn (its text is the costly part)."""
        finite = y[np.isfinite(y)]
        top = nice_ceiling(float(finite.max()) * 1.05 if finite.size else 0.0)
        if self._tops.get(key) != top:
            self._tops[key] = top
            box.setYRange(0, top, padding=0)
            if key == "budget":
                set_value_ticks(self.plots["step_ms"].getPlotItem().getAxis("right"), top)
            else:
                set_value_ticks(self.plots[key].getPlotItem().getAxis("left"), top)

    def _set_span(self, age_s: float) -> None:
        """Show the history there is (at least a minute, in 30 s steps), not 5 empty min."""
        span = min(self.history_s, max(60.0, 30.0 * math.ceil(age_s / 30.0)))
        if span != self.span_s:
            self.span_s = span
            for plot in self.plots.values():
                plot.getPlotItem().setXRange(-span, 0, padding=0)
