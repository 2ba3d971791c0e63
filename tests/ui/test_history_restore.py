"""Restart: the tabs that were open come back in order, with their chats and settings; a
reply a crash cut off comes back marked incomplete and is not continued."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.storage import Message, Store
from tests.ui.conftest import run_until, spin
from tests.ui.history_checks import assert_tab_saved


def send(qtbot, tab, text: str) -> None:
    qtbot.keyClicks(tab.input, text)
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)


def test_open_tabs_come_back_after_a_restart(history_app, loop, qtbot):
    window = history_app.start(meta_delay_s=0.05)
    a = window.current_tab()
    send(qtbot, a, "first chat")
    run_until(loop, lambda: not a.conversation.is_busy)
    b = window.new_tab()
    window.set_tab_title(b, "Tuned")
    b.panel.system.setPlainText("Talk like a pirate.")
    b.panel.fields["max_tokens"].setValue(5)
    send(qtbot, b, "second chat")
    run_until(loop, lambda: not b.conversation.is_busy)
    closed = window.new_tab()
    send(qtbot, closed, "closed chat")
    run_until(loop, lambda: not closed.conversation.is_busy)
    window.close_tab(window.tabs.indexOf(closed))
    spin(loop, 0.1)
    before = [(t.conversation.session_id, t.conversation.title, t.conversation.system_prompt,
               t.conversation.params, [(m.role, m.content, m.stats) for m in
                                       t.conversation.messages]) for t in window.chat_tabs()]
    history_app.stop()

    window = history_app.start()
    after = [(t.conversation.session_id, t.conversation.title, t.conversation.system_prompt,
              t.conversation.params, [(m.role, m.content, m.stats) for m in
                                      t.conversation.messages]) for t in window.chat_tabs()]
    assert after == before
    tab = window.chat_tabs()[1]
    assert window.tabs.tabText(1) == "Tuned"
    assert tab.panel.system_prompt() == "Talk like a pirate."
    assert tab.panel.params()["max_tokens"] == 5
    assert "5 tokens" in tab.messages.widgets[1].stats.text()
    # Continue the restored chat: it appends to the same session.
    send(qtbot, tab, "and more")
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert len(tab.conversation.messages) == 4
    assert_tab_saved(history_app.db, tab)


def test_a_cut_off_reply_is_restored_as_incomplete(history_app, loop, qtbot):
    window = history_app.start()
    tab = window.current_tab()
    send(qtbot, tab, "question")
    run_until(loop, lambda: not tab.conversation.is_busy)
    session_id = tab.conversation.session_id
    history_app.stop()
    reply_id = tab.conversation.messages[-1].id
    s = Store.open(history_app.db)  # what a crash mid-reply leaves behind
    s.save_message(Message(session_id=session_id, seq=2, role="user", content="go on",
                           parent_id=reply_id, id="q2"))
    s.save_message(Message(session_id=session_id, seq=3, role="assistant",
                           content="half a rep", is_complete=False, parent_id="q2"))
    s.close()

    window = history_app.start()
    tab = window.current_tab()
    conv = tab.conversation
    assert conv.session_id == session_id and len(conv.messages) == 4
    last = conv.messages[-1]
    assert (last.content, last.streaming, last.finish_reason) == ("half a rep", False,
                                                                 "interrupted")
    assert not conv.is_busy  # not continued
    assert "incomplete" in tab.messages.widgets[3].stats.text()
    assert tab.regenerate_button.isEnabled()
    assert tab.regenerate()  # a new version beside it, in the database too
    run_until(loop, lambda: not conv.is_busy)
    assert_tab_saved(history_app.db, tab)
