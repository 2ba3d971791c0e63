"""The window writes each chat to the history database as it happens."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.ui.conftest import run_until, spin
from tests.ui.history_checks import assert_tab_saved, stored


def send(qtbot, tab, text: str) -> None:
    tab.input.setFocus()
    qtbot.keyClicks(tab.input, text)
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)


def test_sent_and_finished_messages_are_in_the_database(history_app, loop, qtbot):
    window = history_app.start()
    tab = window.current_tab()
    send(qtbot, tab, "Hello there")
    run_until(loop, lambda: not tab.conversation.is_busy)
    send(qtbot, tab, "Once more")
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert_tab_saved(history_app.db, tab)
    s = stored(history_app.db)
    [reply] = [m for m in s.list_messages(tab.conversation.session_id)][1:2]
    assert reply.stats["finish_reason"] == "length" and reply.stats["generated_tokens"] == 12
    assert len(s.list_request_stats(session_id=tab.conversation.session_id)) == 2
    s.close()


def test_tab_title_settings_order_and_close_are_saved(history_app, loop, qtbot):
    window = history_app.start(meta_delay_s=0.05)
    first = window.current_tab()
    second = window.new_tab()
    window.set_tab_title(second, "Second")
    second.panel.system.setPlainText("Answer in French.")
    second.panel.fields["temperature"].setValue(0.3)
    spin(loop, 0.2)  # settings are saved after a short pause in typing
    assert_tab_saved(history_app.db, second)
    window.tabs.tabBar().moveTab(1, 0)
    s = stored(history_app.db)
    assert [x.id for x in s.list_sessions(open_only=True)] == [
        second.conversation.session_id, first.conversation.session_id]
    s.close()
    send(qtbot, first, "keep me")
    run_until(loop, lambda: not first.conversation.is_busy)
    window.close_tab(window.tabs.indexOf(first))
    s = stored(history_app.db)
    closed = s.get_session(first.conversation.session_id)
    assert closed is not None and not closed.is_open  # still in the history
    assert [x.id for x in s.list_sessions(open_only=True)] == [second.conversation.session_id]
    s.close()


def test_closing_the_window_mid_reply_saves_it_as_shut_down(history_app, loop, qtbot):
    window = history_app.start()
    tab = window.current_tab()
    tab.panel.fields["max_tokens"].setValue(5000)
    send(qtbot, tab, "a long answer please")
    run_until(loop, lambda: len(tab.conversation.messages[1].content) > 20)
    history_app.stop()  # close the window as the user would, then the app closes the store
    reply = tab.conversation.messages[1]
    assert reply.finish_reason == "shutdown"
    s = stored(history_app.db)
    [_, row] = s.list_messages(tab.conversation.session_id)
    s.close()
    assert row.is_complete and row.content == reply.content
    assert row.stats["finish_reason"] == "shutdown"
