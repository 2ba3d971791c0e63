"""Tabs as in a browser: fixed widths (close buttons do not jump), titles from the first
message, Ctrl+1…9 / Ctrl+Tab, and Ctrl+Shift+T reopening a closed (even generating) chat."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QTabBar

from app.titles import title_from_message
from tests.ui.conftest import run_until, start_long_reply
from ui.main_window import BUSY_MARK

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def _activate(window, loop) -> None:
    """Shortcuts need an active window; offscreen activates it a moment after showing."""
    window.activateWindow()
    run_until(loop, lambda: QApplication.activeWindow() is window, timeout=2)


def _close_button_x(window, index: int) -> int:
    bar = window.tabs.tabBar()
    button = bar.tabButton(index, QTabBar.ButtonPosition.RightSide)
    return button.mapTo(window, button.rect().topLeft()).x()


def test_close_buttons_stay_put_while_a_tab_generates(window, loop, qtbot):
    first = window.current_tab()
    window.new_tab()
    window.new_tab()
    before = [_close_button_x(window, i) for i in range(3)]
    first.panel.fields["max_tokens"].setValue(5000)
    first.send_text("tell me a long story")
    run_until(loop, lambda: window.tabs.tabText(0).startswith(BUSY_MARK))
    qtbot.wait(20)
    assert [_close_button_x(window, i) for i in range(3)] == before
    first.stop()
    run_until(loop, lambda: not window.tabs.tabText(0).startswith(BUSY_MARK))
    assert [_close_button_x(window, i) for i in range(3)] == before


def test_title_comes_from_the_first_message_and_stays_editable(window, loop, qtbot):
    tab = window.current_tab()
    text = "How do I reverse a linked list in place without extra memory?\nThanks"
    tab.send_text(text)
    title = title_from_message(text)
    assert title == "How do I reverse a linked list in place without extra memory?"
    assert tab.conversation.title == title
    assert window.tabs.tabText(0).endswith(title)
    run_until(loop, lambda: not tab.conversation.is_busy)
    tab.send_text("and a second message does not rename it")
    assert tab.conversation.title == title
    run_until(loop, lambda: not tab.conversation.is_busy)
    window.set_tab_title(tab, "Linked lists")
    assert window.tabs.tabText(0) == "Linked lists"
    other = window.new_tab()
    window.set_tab_title(other, "Named first")
    other.send_text("a user-named chat keeps its name")
    assert other.conversation.title == "Named first"
    run_until(loop, lambda: not other.conversation.is_busy)


def test_title_from_message_cuts_at_a_word():
    assert title_from_message("  \n\n  Hello   there  ") == "Hello there"
    long = title_from_message("Explain the difference between processes and threads in "
                              "operating systems", limit=32)
    assert long == "Explain the difference between"  # a whole word, no "…"
    assert title_from_message("   ") == ""


def test_ctrl_number_and_ctrl_tab_switch_tabs(window, loop, qtbot):
    _activate(window, loop)
    for _ in range(4):
        window.new_tab()
    assert window.tabs.count() == 5
    qtbot.keyClick(window, Qt.Key.Key_2, CTRL)
    assert window.tabs.currentIndex() == 1
    qtbot.keyClick(window, Qt.Key.Key_9, CTRL)
    assert window.tabs.currentIndex() == 4  # Ctrl+9: the last tab
    qtbot.keyClick(window.focusWidget() or window, Qt.Key.Key_Tab, CTRL)
    assert window.tabs.currentIndex() == 0  # wraps around
    qtbot.keyClick(window.focusWidget() or window, Qt.Key.Key_Backtab, CTRL | SHIFT)
    assert window.tabs.currentIndex() == 4
    qtbot.keyClick(window, Qt.Key.Key_1, CTRL)
    assert window.tabs.currentIndex() == 0
    assert window.focusWidget() is window.current_tab().input


def test_reopen_a_closed_generating_tab_without_history(window, loop, qtbot):
    _activate(window, loop)
    tab = window.current_tab()
    gen = start_long_reply(tab, loop, "a reply that will be cut off")
    window.new_tab()
    session = tab.conversation.session_id
    window.close_tab(window.tabs.indexOf(tab))
    run_until(loop, lambda: gen.stream.finished)
    shown = gen.text
    assert window.tabs.count() == 1
    _activate(window, loop)
    qtbot.keyClick(window, Qt.Key.Key_T, CTRL | SHIFT)
    assert window.tabs.count() == 2
    back = window.current_tab()
    assert back.conversation.session_id == session
    assert [m.role for m in back.conversation.messages] == ["user", "assistant"]
    reply = back.conversation.messages[1]
    assert not reply.streaming and reply.finish_reason == "cancelled"
    assert shown.startswith(reply.content) and reply.content
    assert back.messages.widgets[1].body.source_text == reply.content
    assert not window.reopen_action.isEnabled()  # nothing more to reopen
    # the reopened tab keeps the closed one's room for 5,000 tokens, which the tiny model
    # (no end token) fills: ~25 CPU-s. A short whole reply shows the chat works as well.
    assert back.panel.fields["max_tokens"].value() == 5000
    back.panel.fields["max_tokens"].setValue(12)
    assert back.send_text("and it goes on")  # the reopened chat works
    # a whole reply: 20 s was too short once in CI on a slower, loaded machine
    run_until(loop, lambda: not back.conversation.is_busy, timeout=60.0)
    last = back.conversation.messages[-1]
    assert last.role == "assistant" and last.finish_reason == "length" and last.content


def test_reopen_restores_the_chat_from_the_history(history_app, loop, qtbot):
    window = history_app.start()
    _activate(window, loop)
    tab = window.current_tab()
    gen = start_long_reply(tab, loop, "remember this chat")
    session = tab.conversation.session_id
    title = tab.conversation.title
    window.new_tab()
    window.close_tab(window.tabs.indexOf(tab))
    run_until(loop, lambda: gen.stream.finished)
    _activate(window, loop)
    qtbot.keyClick(window, Qt.Key.Key_T, CTRL | SHIFT)
    back = window.current_tab()
    assert back is not tab and back.conversation is not tab.conversation  # loaded anew
    assert back.conversation.session_id == session
    assert back.conversation.title == title == "remember this chat"
    assert back.conversation.messages[0].content == "remember this chat"
    reply = back.conversation.messages[1]
    assert reply.finish_reason == "cancelled" and reply.content
    assert gen.text.startswith(reply.content)
