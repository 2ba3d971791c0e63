"""The window on a history file with a damaged table page (issue #15, item 2): a box says
the file was damaged, where it was moved and what was recovered; the open chats come back
with every message that could be read, and new chats are saved."""

from __future__ import annotations

from tests.app.damaged_page import damage_page_holding, fill_history
from tests.ui.history_checks import assert_tab_saved
from tests.ui.test_history_export import chat


def test_damaged_page_is_reported_and_the_chats_come_back(history_app, loop, qtbot):
    sessions = fill_history(history_app.db, chats=2, messages=40)
    lost = damage_page_holding(history_app.db, b"MSG-0045-")
    window = history_app.start()
    box = window.history.notice_box
    assert box is not None and box.isVisible() and not box.isModal()
    [aside] = history_app.db.parent.glob("h.db.corrupt-*Z")
    assert "damaged" in box.text() and str(aside) in box.text()
    assert f"Recovered 2 chats, {80 - len(lost)} messages." in box.text()
    tabs = window.chat_tabs()
    assert [t.conversation.session_id for t in tabs] == [s.id for s in sessions]
    assert sum(len(t.conversation.messages) for t in tabs) == 80 - len(lost)
    window.new_tab()
    tab = chat(window, loop, qtbot, "after the repair")
    window.history.retry()
    assert_tab_saved(history_app.db, tab)
