"""The settings panel: hidden by default, one toggle for every tab, remembered in
settings.json across restarts; sampling settings stay per tab."""

from __future__ import annotations

import asyncio
import json

from PySide6.QtCore import Qt

from app.settings import Settings
from tests.ui.conftest import run_until
from ui.main_window import MainWindow

LEFT = Qt.MouseButton.LeftButton


def test_panel_hidden_by_default_and_one_toggle_for_all_tabs(window, loop, qtbot, settings):
    first = window.current_tab()
    second = window.new_tab()
    assert not first.panel.isVisible() and not second.panel.isVisible()
    assert not second.settings_button.isChecked()
    qtbot.mouseClick(second.settings_button, LEFT)
    assert second.panel.isVisible()
    window.tabs.setCurrentWidget(first)
    assert first.panel.isVisible() and first.settings_button.isChecked()
    third = window.new_tab()  # a new tab follows the toggle too
    assert third.panel.isVisible()
    # the toggle went to the real settings file
    assert json.loads(settings.path.read_text(encoding="utf-8"))["show_settings_panel"] is True
    assert Settings.load(settings.path).show_settings_panel is True
    # sampling settings stay per tab
    first.panel.fields["temperature"].setValue(1.3)
    assert second.panel.fields["temperature"].value() != 1.3
    assert first.conversation.params["temperature"] == 1.3
    qtbot.mouseClick(third.settings_button, LEFT)
    assert not third.panel.isVisible() and not first.settings_button.isChecked()
    assert Settings.load(settings.path).show_settings_panel is False


def test_panel_state_comes_back_after_a_restart(ctx, loop, qtbot, settings):
    settings.set_settings_panel(True)
    reloaded = Settings.load(settings.path)
    ctx.settings = reloaded
    window = MainWindow(ctx)
    window.show()
    qtbot.waitExposed(window)
    try:
        assert window.current_tab().panel.isVisible()
        assert window.current_tab().settings_button.isChecked()
    finally:
        window.close()
        run_until(loop, lambda: window._closed, timeout=10)
        window.deleteLater()



def test_panel_fits_a_900x600_window_by_scrolling(window, loop):
    """The panel (system prompt, preset, sampling, stop strings, output format, tools) is
    taller than a 600-pixel window leaves it: it scrolls, the window keeps its size."""
    window.ctx.settings.set_settings_panel(True)
    window.resize(900, 600)
    for _ in range(5):
        loop.run_until_complete(asyncio.sleep(0.02))
    tab = window.current_tab()
    assert (window.width(), window.height()) == (900, 600)
    area = tab.panel_area
    assert tab.panel.isVisible() and area.height() < tab.panel.minimumSizeHint().height()
    bar = area.verticalScrollBar()
    assert bar.maximum() > 0
    bar.setValue(bar.maximum())  # the last rows can be reached
    last = tab.panel.tools
    assert last.visibleRegion().boundingRect().height() > 0
