"""The window when the history cannot be written (issue #15, items 3 and 4): a read-only
folder shows past chats with a banner that offers to save elsewhere, and quitting with
unsaved changes asks first (retry, save to another file, quit anyway, cancel). Real
files: a really read-only folder, a lock held by another connection."""

from __future__ import annotations

import sqlite3

import pytest
from PySide6.QtWidgets import QApplication

from app.storage import Store
from tests.app.test_storage_failures_readonly import _make_read_only, _undo_read_only
from tests.ui.conftest import run_until
from tests.ui.history_checks import assert_tab_saved
from tests.ui.test_history_export import chat


def test_read_only_folder_shows_past_chats_and_saves_them_elsewhere(history_app, loop,
                                                                    qtbot, tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    history_app.db = folder / "h.db"
    window = history_app.start()
    before = chat(window, loop, qtbot, "saved before")
    session_id = before.conversation.session_id
    history_app.stop()
    _make_read_only(folder)
    try:
        window = history_app.start()
        controller = window.history
        [tab] = window.chat_tabs()
        assert tab.conversation.session_id == session_id
        assert tab.conversation.messages[0].content == "saved before"  # history visible
        banner = controller.banner
        assert banner.isVisible() and "read-only" in banner.label.text()
        assert "kept in memory only" in banner.label.text()
        chat(window, loop, qtbot, "only in memory")
        assert controller.history.pending_count > 0
        elsewhere = tmp_path / "elsewhere.db"
        controller.ask_save_path = lambda: str(elsewhere)
        banner.button.click()
        assert not banner.isVisible()
        assert controller.history.pending_count == 0
        assert "now saved in" in window.statusBar().currentMessage()
        chat(window, loop, qtbot, "after the move")
        assert_tab_saved(elsewhere, tab)
    finally:
        _undo_read_only(folder)
        folder.chmod(0o755)


@pytest.fixture
def locked(history_app, loop, qtbot):
    """The window with a chat whose last messages cannot be saved (the file is locked)."""
    window = history_app.start()
    tab = chat(window, loop, qtbot, "saved")
    other = sqlite3.connect(history_app.db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    chat(window, loop, qtbot, "not saved yet")
    assert window.history.history.pending_count > 0
    yield window, tab, other
    if other.in_transaction:
        other.rollback()
    other.close()


def ask_to_quit(window, qtbot):
    window.close()
    box = window.history.quit_box
    assert box is not None and box.isVisible() and not window._closing
    assert "could not be saved" in box.text() and "locked" in box.text()
    return box


def test_quit_with_unsaved_changes_asks_and_retry_saves_them(history_app, loop, qtbot,
                                                             locked):
    window, tab, other = locked
    ask_to_quit(window, qtbot)
    window.history.quit_buttons["retry"].click()  # still locked: asked again
    run_until(loop, lambda: window.history.quit_box is not None)
    assert not window._closing
    other.rollback()
    window.history.quit_buttons["retry"].click()
    run_until(loop, lambda: window._closed, timeout=10)
    assert_tab_saved(history_app.db, tab)


def test_quit_can_save_to_another_file(history_app, loop, qtbot, locked, tmp_path):
    window, tab, _other = locked
    ask_to_quit(window, qtbot)
    elsewhere = tmp_path / "rescued.db"
    window.history.ask_save_path = lambda: str(elsewhere)
    window.history.quit_buttons["elsewhere"].click()
    run_until(loop, lambda: window._closed, timeout=10)
    assert_tab_saved(elsewhere, tab)


def test_quit_anyway_and_cancel(history_app, loop, qtbot, locked):
    window, tab, other = locked
    ask_to_quit(window, qtbot)
    window.history.quit_buttons["cancel"].click()
    QApplication.processEvents()
    run_until(loop, lambda: window.history.quit_box is None)
    assert window.isVisible() and not window._closing  # still working
    ask_to_quit(window, qtbot)
    window.history.quit_buttons["anyway"].click()
    run_until(loop, lambda: window._closed, timeout=10)
    other.rollback()
    s = Store.open(history_app.db, read_only=True)
    try:  # what was saved before is still there; the user chose to drop the rest
        assert [m.content for m in s.list_messages(tab.conversation.session_id)][0] == "saved"
    finally:
        s.close()


def test_a_second_ctrl_c_while_asked_quits(history_app, loop, qtbot, locked):
    from ui.startup import _interrupt

    window, _tab, _other = locked
    _interrupt(window)  # the first Ctrl+C closes the window, which asks
    assert window.history.quit_box is not None and not window._closing
    _interrupt(window)
    run_until(loop, lambda: window._closed, timeout=10)


def test_sigterm_quits_without_asking(history_app, loop, qtbot, locked):
    from ui.startup import _terminate

    window, _tab, _other = locked
    _terminate(window)  # SIGTERM/SIGHUP: nobody can answer a question
    run_until(loop, lambda: window._closing)
    assert window.history.quit_box is None and window.history.unattended
    run_until(loop, lambda: window._closed, timeout=10)


def test_sigterm_while_asked_closes_the_question_and_quits(history_app, loop, qtbot,
                                                           locked):
    from ui.startup import _terminate

    window, _tab, _other = locked
    ask_to_quit(window, qtbot)  # the user closed the window and was asked ...
    _terminate(window)  # ... then the session ended
    run_until(loop, lambda: window._closed, timeout=10)
    assert window.history.quit_box is None and window.history.unattended
