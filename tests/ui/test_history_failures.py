"""A history database that is damaged, locked or read-only at startup: the app opens and
works, says what is wrong, keeps unsaved changes in memory and writes them once it can."""

from __future__ import annotations

import sqlite3

from PySide6.QtCore import Qt

from app.storage import Store
from tests.app.test_storage_failures_readonly import _make_read_only, _undo_read_only
from tests.ui.conftest import run_until
from tests.ui.history_checks import assert_tab_saved, stored


def send(qtbot, tab, text: str) -> None:
    qtbot.keyClicks(tab.input, text)
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)


def saved_chat(history_app, loop, qtbot) -> str:
    window = history_app.start()
    tab = window.current_tab()
    send(qtbot, tab, "saved before")
    run_until(loop, lambda: not tab.conversation.is_busy)
    session_id = tab.conversation.session_id
    history_app.stop()
    return session_id


def chat_while_unsaved(window, loop, qtbot, what: str):
    """Chat on although nothing can be saved; the status bar says so."""
    tab = window.current_tab()
    send(qtbot, tab, "written later")
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert len(tab.conversation.messages) >= 2 and tab.conversation.messages[-1].content
    controller = window.history
    assert controller.history.pending_count > 0
    assert controller.label.isVisible()
    assert "unsaved changes, retrying" in controller.label.text()
    assert what in controller.label.toolTip()
    return tab


def test_damaged_file_is_set_aside_and_a_new_one_used(history_app, loop, qtbot):
    history_app.db.write_bytes(b"this is not an SQLite database" * 100)
    window = history_app.start()
    box = window.history.notice_box
    assert box is not None and box.isVisible() and not box.isModal()
    assert "damaged" in box.text()
    [aside] = history_app.db.parent.glob("h.db.corrupt-*")
    assert aside.read_bytes() == b"this is not an SQLite database" * 100  # never deleted
    tab = window.current_tab()
    send(qtbot, tab, "hello")
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert_tab_saved(history_app.db, tab)


def test_locked_database_keeps_changes_until_the_lock_goes(history_app, loop, qtbot):
    session_id = saved_chat(history_app, loop, qtbot)
    other = sqlite3.connect(history_app.db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        window = history_app.start()
        tab = window.current_tab()
        assert tab.conversation.session_id == session_id  # reading still works (WAL)
        tab = chat_while_unsaved(window, loop, qtbot, "locked")
        window.history.retry()
        assert window.history.history.pending_count > 0
    finally:
        other.rollback()
        other.close()
    window.history.retry()  # what the timer does every few seconds
    assert window.history.history.pending_count == 0
    assert not window.history.label.isVisible()
    assert_tab_saved(history_app.db, tab)


def test_read_only_database_keeps_changes_until_writable(history_app, loop, qtbot):
    session_id = saved_chat(history_app, loop, qtbot)
    s = Store.open(history_app.db)
    s.close()
    _make_read_only(history_app.db)
    try:
        window = history_app.start()
        box = window.history.notice_box
        assert box is not None and "read-only" in box.text()
        tab = window.current_tab()
        assert tab.conversation.session_id == session_id
        assert tab.conversation.messages[0].content == "saved before"
        tab = chat_while_unsaved(window, loop, qtbot, "read-only")
        assert len(stored(history_app.db).list_messages(session_id)) == 2
    finally:
        _undo_read_only(history_app.db)
    window.history.retry()
    assert window.history.history.pending_count == 0
    assert_tab_saved(history_app.db, tab)
    assert stored(history_app.db).list_messages(session_id)[0].content == "saved before"
