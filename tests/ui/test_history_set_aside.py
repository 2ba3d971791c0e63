"""The window with text the history cannot take (issue #15, item 1): the tab refuses it
with a message naming the character, a write that can never succeed is set aside and
reported in one box, and every other tab keeps saving."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.conversation import Conversation
from app.storage.set_aside import read, set_aside_path
from tests.ui.conftest import run_until
from tests.ui.history_checks import assert_tab_saved


def test_a_message_with_a_lone_surrogate_is_refused_in_the_tab(history_app, loop, qtbot):
    window = history_app.start()
    tab = window.current_tab()
    assert not tab.send_text("hi \ud800")
    assert tab.notice.isVisible() and "U+D800" in tab.notice.text()
    assert tab.conversation.messages == []
    qtbot.keyClicks(tab.input, "hello")
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: len(tab.conversation.messages) == 2
              and not tab.conversation.is_busy)
    window.history.retry()
    assert window.history.history.pending_count == 0
    assert_tab_saved(history_app.db, tab)


def test_an_unsavable_write_is_reported_once_and_blocks_no_other_tab(history_app, loop, qtbot):
    window = history_app.start()
    controller = window.history
    bad = Conversation(window.ctx.bridge, title="bad \ud800 one")  # a title never repaired
    window.new_tab(conversation=bad)
    box = controller.set_aside_box
    assert box is not None and box.isVisible() and not box.isModal()
    assert "1 change to the history could not be saved" in box.text()
    assert str(set_aside_path(history_app.db)) in box.text()
    window.new_tab(conversation=Conversation(window.ctx.bridge, title="bad \udc00 two"))
    assert controller.set_aside_box is box and "2 changes" in box.text()  # one box, updated
    tab = window.new_tab()
    qtbot.keyClicks(tab.input, "still saved")
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: len(tab.conversation.messages) == 2
              and not tab.conversation.is_busy)
    controller.retry()
    assert controller.history.pending_count == 0 and not controller.label.isVisible()
    assert_tab_saved(history_app.db, tab)
    titles = [e["args"][0]["title"] for e in read(set_aside_path(history_app.db))]
    assert titles == ["bad \ud800 one", "bad \udc00 two"]


def test_writes_set_aside_at_the_last_quit_are_restored_and_said_at_start(history_app, loop,
                                                                          qtbot):
    """Issue #28: the database was locked when the app was told to quit; the next start
    writes those changes back, its tabs show them, and one box says how many came back."""
    from tests.app.test_history_replay import locked, quit_with_writes_set_aside

    chats = quit_with_writes_set_aside(history_app.db, locked)
    window = history_app.start()
    box = window.history.notice_box
    assert box is not None and box.isVisible() and not box.isModal()
    assert "3 messages (in 2 chats) that could not be saved before BatchChat last quit " \
           "were restored to the history" in box.text()
    titles = {t.conversation.title: [m.content for m in t.conversation.messages]
              for t in window.chat_tabs()}
    assert titles["renamed"] == ["one", chats.two.content, "part of a reply"]
    assert titles["another chat"] == ["three"]
    assert not set_aside_path(history_app.db).exists()
