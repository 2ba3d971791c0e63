"""Issue #46 item 19: three model loads within a few minutes leave one readable name on the
stats charts' marks, not three piled on each other; the others keep their name in the
line's tooltip."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.ui.conftest import run_until, spin


def test_names_of_close_loads_do_not_pile_up(window, loop, qtbot):
    window.resize(1200, 780)
    window.activateWindow()
    run_until(loop, lambda: QApplication.activeWindow() is window, timeout=2)
    qtbot.keyClick(window.current_tab().input, Qt.Key.Key_S,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    dock = window.stats_dock
    run_until(loop, lambda: dock.isVisible() and dock.panel is not None)
    dock.refresh(poll=True)  # a first sample: the loads below come after it
    for source in ("first", "second", "third"):
        assert loop.run_until_complete(window.load_model(source)) is True
        spin(loop, 0.6)  # a refresh or so: the panel sees each model
    dock.refresh(poll=True)
    spin(loop, 0.1)
    lines = [ln for ln in dock.panel.charts.switch_lines["tokens_per_s"] if ln.isVisible()]
    assert len(lines) == 3
    shown = [ln.label for ln in lines if ln.label.isVisible()]
    assert len(shown) >= 1
    newest = max(lines, key=lambda ln: ln.value())
    assert newest.label.isVisible()  # the model in use is named
    rects = [label.sceneBoundingRect() for label in shown]
    assert all(not a.intersects(b) for i, a in enumerate(rects) for b in rects[i + 1:])
    assert all("loaded at" in ln.toolTip() for ln in lines)
