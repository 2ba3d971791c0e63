"""Issue #46 item 18 and item 26 (sidebar): at 900x600 an open dock gets the room for its
content (it stayed 200 px, the simulator form clipped, while the chat column kept ~690 px
with the settings panel): the sidebar, then the settings panel, give way while it is open,
and say so (View → Conversation sidebar and Settings unticked, a status-bar line; the
sidebar hid without a word, still ticked). Ctrl+B brings the sidebar back at once;
closing the dock brings both back."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.ui.conftest import run_until, spin

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def _key(key, modifiers) -> None:
    from pytestqt.qtbot import QtBot

    target = QApplication.focusWidget() or QApplication.activeWindow()
    assert target is not None, "no window takes the keys"
    QtBot.keyClick(target, key, modifiers)


def _settle(loop) -> None:
    for _ in range(5):
        QApplication.processEvents()
        spin(loop, 0.03)


def test_a_dock_gets_its_room_at_900(history_app, loop, qtbot):
    window = history_app.start()
    window.resize(900, 600)
    tab = window.current_tab()
    qtbot.mouseClick(tab.settings_button, Qt.MouseButton.LeftButton)  # the settings panel
    window.activateWindow()
    run_until(loop, lambda: QApplication.activeWindow() is window, timeout=2)
    _key(Qt.Key.Key_T, CTRL)  # a second tab, behind the first: its panel gives way too
    _key(Qt.Key.Key_1, CTRL)
    assert window.current_tab() is tab
    _settle(loop)
    sidebar, action = window.sidebar, window.actions_by_name["sidebar"]
    assert sidebar.width() > 150 and action.isChecked() and tab.panel.isVisible()

    _key(Qt.Key.Key_L, CTRL | SHIFT)  # the load simulator
    dock = window.sim_dock
    _settle(loop)
    run_until(loop, lambda: dock.width() >= 360, timeout=2)  # once the layout settled
    assert window.width() == 900
    # the form whole, no sideways scroll bar
    margins = dock.panel.layout().contentsMargins()
    assert dock.panel.controls.minimumSize().width() + margins.left() + margins.right() \
        <= dock.widget().viewport().width()
    assert dock.widget().horizontalScrollBar().maximum() == 0
    # what gave way says so, and the saved choices stay
    assert not sidebar.isVisible() and not action.isChecked()
    assert not tab.panel.isVisible() and not tab.settings_button.isChecked()
    assert "hidden for the dock" in window.statusBar().currentMessage()
    assert window.ctx.settings.show_sidebar and window.ctx.settings.show_settings_panel
    assert tab.messages.width() >= 480

    _key(Qt.Key.Key_B, CTRL)  # the sidebar back at once, with room; the dock narrower
    _settle(loop)
    assert sidebar.isVisible() and action.isChecked()
    run_until(loop, lambda: sidebar.width() >= 150, timeout=2)
    assert tab.messages.width() >= 480 and window.width() == 900

    dock.close()  # closed: everything is back as chosen
    _settle(loop)
    assert sidebar.isVisible() and action.isChecked()
    run_until(loop, lambda: sidebar.width() > 150, timeout=2)
    assert tab.panel.isVisible() and tab.settings_button.isChecked()
