"""Issue #46 item 26 (simulator chart): the latency chart's key (E2E, TTFT) no longer sits on
bar 1: nothing but the bars is drawn in bar 1's column, and the title names both bars."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QRectF

from tests.ui.chart_reading import bar_heights
from tests.ui.test_simulator_panel import click, configure, open_panel, wait_finished


def test_the_key_leaves_bar_one_free(window, loop, qtbot):
    window.resize(1200, 780)
    panel = open_panel(window, qtbot)
    configure(panel, requests=3, burst=3)
    click(qtbot, panel.start_button)
    wait_finished(loop, panel)
    ttft, e2e = bar_heights(panel.summary)
    assert len(e2e) == 3
    item = panel.summary.chart.getPlotItem()
    box = item.getViewBox()
    top = box.viewRange()[1][1]
    column = QRectF(box.mapViewToScene(pg.Point(0.6, top)),
                    box.mapViewToScene(pg.Point(1.4, 0.0))).normalized()  # bar 1's, full
    keys = [it for it in item.scene().items()
            if isinstance(it, pg.LegendItem) and it.isVisible()]
    assert all(not key.sceneBoundingRect().intersects(column) for key in keys)
    title = item.titleLabel.text
    assert "E2E" in title and "TTFT" in title
