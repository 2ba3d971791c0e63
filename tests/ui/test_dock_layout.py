"""Docks never crush the chat: with the stats or simulator dock open (and the settings
panel shown or not) the chat keeps its minimum width at 1200x780 and 900x600, the window
is not forced wider, and the docks take what is left with narrower layouts."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.ui.conftest import spin
from ui.chat.chat_tab import CHAT_MIN_WIDTH
from ui.reflow import ReflowGrid

SIZES = ((1200, 780), (900, 600))


def _settle(loop) -> None:
    for _ in range(5):
        QApplication.processEvents()
        spin(loop, 0.02)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dock_name", ["stats_dock", "sim_dock"])
@pytest.mark.parametrize("panel_shown", [False, True], ids=["no-settings", "settings"])
def test_chat_keeps_its_width_with_a_dock_open(window, loop, size, dock_name, panel_shown):
    window.ctx.settings.set_settings_panel(panel_shown)
    window.resize(*size)
    dock = getattr(window, dock_name)
    dock.show()
    _settle(loop)
    tab = window.current_tab()
    assert window.width() == size[0]  # the dock did not push the window wider
    # at 900 px the settings panel gives the dock its room (#46 item 18), and says so
    panel_kept = panel_shown and size[0] >= 1200
    assert tab.panel.isVisible() == panel_kept
    assert tab.settings_button.isChecked() == panel_kept
    if panel_shown and not panel_kept:
        assert "hidden for the dock" in window.statusBar().currentMessage()
        assert window.ctx.settings.show_settings_panel  # the saved choice stays
    assert tab.messages.width() >= CHAT_MIN_WIDTH
    assert tab.input.width() >= CHAT_MIN_WIDTH - 160  # the buttons beside it take the rest
    assert dock.isVisible() and dock.width() >= (200 if panel_kept else 360)
    # the dock really is beside the chat, not over it
    chat_right = tab.messages.mapTo(window, tab.messages.rect().topRight()).x()
    assert chat_right < dock.geometry().left()
    # nothing in the dock sticks out past the window's right edge
    assert dock.geometry().right() <= window.width()
    if panel_kept:  # the settings panel squeezed beside it: its buttons still whole
        panel = tab.panel
        for button in (panel.save_preset_button, panel.delete_preset_button,
                       panel.reset_all_button, panel.make_defaults_button,
                       panel.reset_buttons["max_tokens"]):
            assert button.width() >= button.sizeHint().width()
            assert button.mapTo(panel, button.rect().topRight()).x() < panel.width()
    # and at its narrowest it still shows what it is for without a sideways scroll: every
    # number of the stats; the simulator's target, Start and Stop (its results may scroll)
    if dock_name == "stats_dock":
        dock.refresh(poll=True)  # real numbers, as wide as they get here
        _settle(loop)
        assert _inside(dock, dock.panel.values.values())
        assert dock.widget().horizontalScrollBar().maximum() == 0
    else:
        margins = dock.panel.layout().contentsMargins()
        needs = dock.panel.controls.minimumSize().width() + margins.left() + margins.right()
        assert needs <= dock.widget().viewport().width()


def test_stats_dock_reflows_to_one_column_when_narrow(window, loop):
    window.resize(900, 600)
    window.stats_dock.show()
    _settle(loop)
    charts = window.stats_dock.panel.charts
    chart_grid = charts.findChild(ReflowGrid)
    plots = list(charts.plots.values())
    window.resizeDocks([window.stats_dock], [220], Qt.Orientation.Horizontal)
    _settle(loop)
    assert chart_grid.columns == 1
    xs = {p.mapTo(window, p.rect().topLeft()).x() for p in plots}
    assert len(xs) == 1  # one column: every chart starts at the same x
    window.resize(1600, 780)
    window.resizeDocks([window.stats_dock], [900], Qt.Orientation.Horizontal)
    _settle(loop)
    assert chart_grid.columns == 2
    xs = {p.mapTo(window, p.rect().topLeft()).x() for p in plots}
    assert len(xs) == 2


def test_simulator_stacks_its_form_above_the_results_when_narrow(window, loop):
    window.resize(900, 600)
    window.sim_dock.show()
    _settle(loop)
    panel = window.sim_dock.panel
    window.resizeDocks([window.sim_dock], [300], Qt.Orientation.Horizontal)
    _settle(loop)
    assert panel.split.orientation() == Qt.Orientation.Vertical
    assert panel.table.mapTo(panel, panel.table.rect().topLeft()).y() > \
        panel.form.mapTo(panel, panel.form.rect().topLeft()).y()
    window.resize(1600, 780)
    window.resizeDocks([window.sim_dock], [900], Qt.Orientation.Horizontal)
    _settle(loop)
    assert panel.split.orientation() == Qt.Orientation.Horizontal



def _inside(dock, labels) -> bool:
    """Every label lies within the dock's visible (scrolled) area."""
    view = dock.widget().viewport()
    return all(0 <= label.mapTo(view, label.rect().topRight()).x() < view.width()
               for label in labels)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dock_name", ["stats_dock", "sim_dock"])
def test_a_dock_first_shown_after_a_restart_gets_room(history_app, loop, size, dock_name):
    """A restored layout holds a never-shown dock at its bare minimum width; shown, it
    takes the room the window has (numbers and form fields in view, no sideways scroll)
    and the chat keeps its minimum."""
    window = history_app.start()
    window.resize(*size)
    _settle(loop)
    history_app.stop()  # saves the layout: this dock never shown
    window = history_app.start()
    window.resize(*size)
    dock = getattr(window, dock_name)
    dock.show()
    _settle(loop)
    assert dock.width() > 300
    assert window.current_tab().messages.width() >= CHAT_MIN_WIDTH
    assert dock.widget().horizontalScrollBar().maximum() == 0
    if dock_name == "stats_dock":
        assert _inside(dock, dock.panel.values.values())
    dock.hide()
    window.resizeDocks([dock], [320], Qt.Orientation.Horizontal)
    dock.show()  # a width the user chose is kept
    _settle(loop)
    assert abs(dock.width() - 320) < 10
