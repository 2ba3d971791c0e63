"""Looks and habits: light/dark themes (following the OS unless overridden), the Help menu,
Quit last, and the window's size, dock layout and unsent drafts after a restart."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QMessageBox

from app.conversation import ChatMessage
from tests.ui.conftest import spin


def _window_lightness() -> int:
    return QApplication.instance().palette().color(QPalette.ColorRole.Window).lightness()


def _code_background(window) -> int:
    body = window.current_tab().messages.widgets[0].body
    block = body.code_view(0)[0].document().find("x = 1").block()  # the code block's view
    return block.blockFormat().background().color().lightness()


def test_theme_switch_from_the_menu(window, loop, settings):
    hints = QGuiApplication.styleHints()
    tab = window.current_tab()
    tab.conversation.messages[:] = [ChatMessage("assistant", "```python\nx = 1\n```",
                                                finish_reason="stop")]
    tab.messages.set_messages(tab.conversation.messages)
    try:
        window.theme_actions["light"].trigger()
        assert _window_lightness() > 128 and _code_background(window) > 128
        window.theme_actions["dark"].trigger()
        assert _window_lightness() < 128
        assert "#1b1d21" in QApplication.instance().styleSheet()
        assert _code_background(window) < 128  # rendered replies follow
        assert json.loads(settings.path.read_text(encoding="utf-8"))["theme"] == "dark"
        # back to following the OS (offscreen reports no scheme, which reads as light;
        # the platform cannot be made to change it here)
        window.theme_actions["system"].trigger()
        assert window.theme.dark == (hints.colorScheme() == Qt.ColorScheme.Dark)
        assert json.loads(settings.path.read_text(encoding="utf-8"))["theme"] == "system"
    finally:
        window.theme.set_choice("light")


def test_help_menu_and_quit_last(history_app, loop):
    window = history_app.start()
    menus = {a.text(): a.menu() for a in window.menuBar().actions()}
    assert list(menus)[-1] == "&Help"
    assert menus["&Chat"].actions()[-1].text() == "&Quit"  # even with History… added
    about = next(a for a in menus["&Help"].actions() if a.text() == "&About BatchChat")
    about.trigger()
    box = window.findChild(QMessageBox, "aboutBox")
    assert box is not None and box.isVisible()
    text = box.text()
    assert "0.1.0" in text or "development copy" in text
    assert "tiny test model" in text and "Data directory" in text and "MLX device" in text
    assert "Same answer" in text and "docs/determinism.md" in text  # issue #25
    box.close()
    keys = next(a for a in menus["&Help"].actions() if a.text() == "&Keyboard shortcuts")
    keys.trigger()
    box = window.findChild(QMessageBox, "shortcutsBox")
    assert "Ctrl+Shift+T" in box.text()
    box.close()


def test_size_docks_and_drafts_come_back_after_a_restart(history_app, loop, qtbot):
    window = history_app.start()
    window.resize(760, 560)  # within the offscreen screen (800x600): Qt clamps to it
    window.stats_dock.show()
    first = window.current_tab()
    first.send_text("a sent message")
    second = window.new_tab()
    second.send_text("another chat")
    spin(loop, 0.5)
    qtbot.keyClicks(first.input, "half-typed draft")
    session = first.conversation.session_id
    history_app.stop()
    window = history_app.start()
    assert (window.width(), window.height()) == (760, 560)
    assert window.stats_dock.isVisible()
    tab = next(t for t in window.chat_tabs() if t.conversation.session_id == session)
    assert tab.input.toPlainText() == "half-typed draft"
    other = next(t for t in window.chat_tabs() if t is not tab)
    assert other.input.toPlainText() == ""


def test_charts_follow_the_theme(window, loop):
    import pyqtgraph as pg

    window.stats_dock.show()
    plots = window.findChildren(pg.PlotWidget)
    assert plots  # the stats dock's charts
    try:
        window.theme_actions["light"].trigger()
        assert all(p.backgroundBrush().color().lightness() > 128 for p in plots)
        window.theme_actions["dark"].trigger()
        assert all(p.backgroundBrush().color().lightness() < 128 for p in plots)
        axis = plots[0].getPlotItem().getAxis("left")
        assert axis.textPen().color().lightness() > 128  # light text on the dark chart
        assert plots[0].getPlotItem().titleLabel.text  # titles kept their text
    finally:
        window.theme.set_choice("light")
