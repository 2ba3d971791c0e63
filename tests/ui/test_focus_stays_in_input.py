"""Issue #46 item 16: after a version switch (‹ ›), "Delete from here", Allow on a tool call
and Ctrl+W, the keys go to the tab's input box, never to the sidebar's "Search chats" box
(typing would filter the sidebar instead of writing the message). The real window with its
sidebar (a history file), shown and active, driven with mouse clicks and keys."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication

from tests.ui.conftest import run_until
from tests.ui.test_mcp_tab import ask, block_of, tool_tab

CTRL = Qt.KeyboardModifier.ControlModifier


def _activate(window, loop) -> None:
    """Offscreen, the window loses the keys now and then (a popup closed, a widget
    deleted); a window manager gives them back, as this does."""
    window.activateWindow()
    run_until(loop, lambda: QApplication.activeWindow() is window, timeout=2)


def _say(loop, tab, text: str) -> None:
    assert tab.send_text(text)
    run_until(loop, lambda: not tab.conversation.is_busy)


def _typing_goes_to_the_input(qtbot, loop, window, tab) -> None:
    """The focus is the tab's input, and a typed word lands there (not in the search)."""
    qtbot.waitUntil(lambda: QApplication.focusWidget() is tab.input, timeout=2000)
    before = tab.input.toPlainText()
    qtbot.keyClicks(QApplication.focusWidget(), "hi")
    assert tab.input.toPlainText() == before + "hi"
    assert window.sidebar.search.text() == ""
    tab.input.clear()


def test_keys_stay_in_the_input_after_a_version_switch_and_delete(history_app, loop, qtbot):
    window = history_app.start()
    _activate(window, loop)
    tab = window.current_tab()
    tab.panel.fields["temperature"].setValue(1.0)
    _say(loop, tab, "Pick a word")
    assert tab.regenerate()
    run_until(loop, lambda: not tab.conversation.is_busy)
    _activate(window, loop)
    tab.input.setFocus()
    qtbot.mouseClick(tab.messages.widgets[1].versions.prev_button, Qt.MouseButton.LeftButton)
    assert tab.messages.widgets[1].versions.label.text() == "1/2"
    _typing_goes_to_the_input(qtbot, loop, window, tab)

    _say(loop, tab, "Another one")
    _activate(window, loop)
    widget = tab.messages.widgets[2]
    more, delete = widget.more_button, widget.actions_by_name["delete"]

    def pick_delete() -> None:  # in the menu's own loop (a button's menu runs exec())
        menu = more.menu()
        qtbot.mouseClick(menu, Qt.MouseButton.LeftButton,
                         pos=menu.actionGeometry(delete).center())

    QTimer.singleShot(200, pick_delete)
    qtbot.mouseClick(more, Qt.MouseButton.LeftButton)  # "⋯", then Delete from here
    run_until(loop, lambda: len(tab.conversation.messages) == 2, timeout=5)
    _activate(window, loop)  # the menu closed: the window manager gives the keys back
    assert len(tab.conversation.messages) == 2
    _typing_goes_to_the_input(qtbot, loop, window, tab)


def test_keys_go_to_the_next_tab_after_ctrl_w(history_app, loop, qtbot):
    window = history_app.start()
    first = window.current_tab()
    _say(loop, first, "first chat")
    second = window.new_tab()
    _say(loop, second, "second chat")
    _activate(window, loop)
    second.input.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is second.input, timeout=2000)
    qtbot.keyClick(second.input, Qt.Key.Key_W, CTRL)
    assert window.chat_tabs() == [first]
    _typing_goes_to_the_input(qtbot, loop, window, first)


def test_keys_stay_in_the_input_after_allowing_a_tool_call(history_app, loop, qtbot):
    window = history_app.start()
    tab = tool_tab(window, loop)
    conv = ask(tab, loop)
    block = block_of(tab, 1)
    _activate(window, loop)
    qtbot.mouseClick(block.allow_button, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: block.ask.isHidden(), timeout=30)
    _typing_goes_to_the_input(qtbot, loop, window, tab)
    run_until(loop, lambda: not conv.is_busy, timeout=60)
