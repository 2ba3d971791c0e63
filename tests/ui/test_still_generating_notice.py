"""Issue #46 item 23: "Still generating: press Esc…" goes once the reply has ended (it
stayed under the input box, no longer true)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.ui.conftest import run_until, start_long_reply
from ui.chat.chat_tab import STILL_GENERATING


def test_the_notice_goes_when_the_reply_ends(window, loop, qtbot):
    tab = window.current_tab()
    start_long_reply(tab, loop, "a long story, please")
    tab.input.setFocus()
    qtbot.keyClicks(tab.input, "and then?")
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)  # Enter while it still runs
    assert tab.notice.isVisibleTo(tab) and tab.notice.text() == STILL_GENERATING
    assert tab.input.toPlainText() == "and then?"  # kept, not sent
    qtbot.keyClick(tab.input, Qt.Key.Key_Escape)  # the reply stops
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert not tab.notice.isVisibleTo(tab)
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)  # now it sends
    assert len(tab.conversation.messages) == 4
