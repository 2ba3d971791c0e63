"""The conversation sidebar in the real window on a real history file: the toggle is
remembered, a past chat opens from it (a search hit in a version not shown opens that
version), pin survives a restart, rename follows an open tab, delete waits for its undo."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.settings import Settings
from tests.ui.conftest import run_until
from tests.ui.history_checks import stored
from ui.sidebar.panel import EMPTY_NOTE


def chat(window, loop, text: str):
    """A new tab with one exchange in it; its conversation."""
    tab = window.new_tab()
    tab.send_text(text)
    run_until(loop, lambda: not tab.conversation.is_busy)
    return tab.conversation


def listed(window) -> list[str]:
    return [r.session_id for r in window.sidebar.rows()]


def row_of(window, session_id: str):
    return next(r for r in window.sidebar.rows() if r.session_id == session_id)


def listed_closed(window, session_id: str) -> bool:
    """The chat is listed, as not open in a tab."""
    return any(r.session_id == session_id and not r.is_open for r in window.sidebar.rows())


def click_row(qtbot, window, session_id: str) -> None:
    view = window.sidebar.list
    rect = view.visualItemRect(view.item_for(session_id))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def key_on_row(qtbot, window, session_id: str, key: Qt.Key) -> None:
    view = window.sidebar.list
    view.setCurrentItem(view.item_for(session_id))
    view.setFocus()
    qtbot.keyClick(view, key)


def menu_pick(window, session_id: str, text: str) -> None:
    """Pick `text` from the row's context menu."""
    view = window.sidebar.list
    item = view.item_for(session_id)
    view.customContextMenuRequested.emit(view.visualItemRect(item).center())
    menu = view.menu
    action = next(a for a in menu.actions() if a.text().split("\t")[0] == text)
    action.trigger()
    menu.close()


def stored_rows(db, session_id: str):
    s = stored(db)
    try:
        return s.get_session(session_id), [(m.id, m.parent_id, m.content)
                                           for m in s.list_messages(session_id)]
    finally:
        s.close()


def test_toggle_is_remembered_across_a_restart(history_app, loop, qtbot):
    window = history_app.start()
    action = window.actions_by_name["sidebar"]
    assert window.sidebar.isVisible() and action.isChecked()
    assert action.shortcut().toString() == "Ctrl+B"
    action.trigger()
    assert not window.sidebar.isVisible()
    history_app.stop()
    history_app.settings = Settings.load(history_app.settings.path)  # as a new start reads
    assert history_app.settings.show_sidebar is False
    window = history_app.start()
    assert not window.sidebar.isVisible()
    assert not window.actions_by_name["sidebar"].isChecked()
    window.actions_by_name["sidebar"].trigger()
    assert window.sidebar.isVisible()
    assert Settings.load(history_app.settings.path).show_sidebar is True


def test_open_a_closed_chat_from_the_sidebar(history_app, loop, qtbot):
    window = history_app.start()
    assert window.sidebar.note.text() == EMPTY_NOTE  # a first start says what comes here
    old = chat(window, loop, "first question")
    chat(window, loop, "second question")
    run_until(loop, window.sidebar.note.isHidden)  # gone once a chat is listed
    run_until(loop, lambda: listed(window)[:2] == [window.workspace.front.session_id,
                                                   old.session_id])
    window.workspace.close(old)
    run_until(loop, lambda: listed_closed(window, old.session_id))
    tabs_before = window.tabs.count()
    click_row(qtbot, window, old.session_id)
    front = window.workspace.front
    assert front.session_id == old.session_id and window.tabs.count() == tabs_before + 1
    assert window.current_tab().conversation is front
    assert [m.content for m in front.messages] == [m.content for m in old.messages]
    run_until(loop, lambda: row_of(window, old.session_id).is_open)
    # open already: its tab comes to the front, no second tab
    window.tabs.setCurrentIndex(0)
    key_on_row(qtbot, window, old.session_id, Qt.Key.Key_Return)
    assert window.current_tab().conversation is front
    assert window.tabs.count() == tabs_before + 1


def test_search_hit_in_a_version_not_shown_opens_that_version(history_app, loop, qtbot):
    window = history_app.start()
    conv = chat(window, loop, "zebra stripes question")
    window.workspace.rename(conv, "Animals")  # so only a message can match
    conv.edit_and_resend(0, "giraffe necks question")  # a second version, shown
    run_until(loop, lambda: not conv.is_busy)
    first_version = next(iter(conv.tree.nodes.values()))
    window.workspace.close(conv)
    sidebar = window.sidebar
    qtbot.keyClicks(sidebar.search, "zebra")
    run_until(loop, lambda: [(r.session_id, bool(r.snippet)) for r in sidebar.rows()]
              == [(conv.session_id, True)])
    hit = sidebar.rows()[0]
    assert hit.message_id == first_version.id and "zebra" in hit.snippet.lower()
    qtbot.keyClick(sidebar.search, Qt.Key.Key_Return)  # Enter opens the best hit
    opened = window.workspace.front
    assert opened.session_id == conv.session_id
    assert opened.messages[0].content == "zebra stripes question"
    assert opened.versions(0) == (1, 2)
    sidebar.search.setFocus()
    qtbot.keyClick(sidebar.search, Qt.Key.Key_Escape)  # Esc empties the box: the list again
    assert sidebar.search.text() == ""
    run_until(loop, lambda: sidebar.list.headers() == ["Today"])


def test_pin_moves_a_chat_to_pinned_and_survives_a_restart(history_app, loop, qtbot):
    window = history_app.start()
    old = chat(window, loop, "older chat")
    new = chat(window, loop, "newer chat")
    run_until(loop, lambda: listed(window)[:2] == [new.session_id, old.session_id])
    menu_pick(window, old.session_id, "Pin")
    run_until(loop, lambda: window.sidebar.list.headers() == ["Pinned", "Today"])
    assert listed(window)[:2] == [old.session_id, new.session_id]
    assert row_of(window, old.session_id).pinned
    history_app.stop()
    window = history_app.start()
    run_until(loop, lambda: window.sidebar.list.headers() == ["Pinned", "Today"])
    assert listed(window)[0] == old.session_id
    menu_pick(window, old.session_id, "Unpin")
    run_until(loop, lambda: window.sidebar.list.headers() == ["Today"])
    assert not stored_rows(history_app.db, old.session_id)[0].pinned


def test_rename_an_open_chat_renames_its_tab(history_app, loop, qtbot):
    window = history_app.start()
    conv = chat(window, loop, "to be renamed")
    run_until(loop, lambda: conv.session_id in listed(window))
    key_on_row(qtbot, window, conv.session_id, Qt.Key.Key_F2)
    dialog = window.sidebar.actions.rename_dialog
    assert dialog is not None and dialog.textValue() == conv.title
    dialog.setTextValue("Travel plans")
    dialog.accept()
    tab = window.tabs.tab_for(conv)
    assert conv.title == "Travel plans"
    assert window.tabs.tabText(window.tabs.indexOf(tab)) == "Travel plans"
    run_until(loop, lambda: row_of(window, conv.session_id).title == "Travel plans")
    # a closed chat is renamed in the store
    window.workspace.close(conv)
    run_until(loop, lambda: listed_closed(window, conv.session_id))
    window.sidebar.actions.rename(conv.session_id, "Trip, closed")
    assert stored_rows(history_app.db, conv.session_id)[0].title == "Trip, closed"
    run_until(loop, lambda: row_of(window, conv.session_id).title == "Trip, closed")


def test_delete_then_undo_keeps_everything(history_app, loop, qtbot):
    window = history_app.start()
    conv = chat(window, loop, "keep me please")
    run_until(loop, lambda: conv.session_id in listed(window))
    window.tabs.tab_for(conv).input.setPlainText("an unsent draft")
    before = stored_rows(history_app.db, conv.session_id)[1]
    assert len(before) == 2
    key_on_row(qtbot, window, conv.session_id, Qt.Key.Key_Delete)
    sidebar = window.sidebar
    assert conv.session_id not in listed(window)
    assert window.workspace.find(conv.session_id) is None  # its tab closed
    assert sidebar.undo_bar.isVisible() and "keep me please" in sidebar.undo_bar.label.text()
    assert stored_rows(history_app.db, conv.session_id)[1] == before  # not deleted yet
    qtbot.mouseClick(sidebar.undo_bar.button, Qt.MouseButton.LeftButton)
    assert not sidebar.undo_bar.isVisible()
    back = window.workspace.find(conv.session_id)
    assert back is not None and window.workspace.front is back  # its tab is back
    assert window.tabs.tab_for(back).input.toPlainText() == "an unsent draft"
    run_until(loop, lambda: conv.session_id in listed(window))
    assert stored_rows(history_app.db, conv.session_id)[1] == before
    # quitting with a delete pending: it happens then
    key_on_row(qtbot, window, conv.session_id, Qt.Key.Key_Delete)
    history_app.stop()
    assert stored_rows(history_app.db, conv.session_id) == (None, [])


def test_delete_without_undo_removes_the_rows_after_the_timeout(history_app, loop, qtbot):
    window = history_app.start()
    gone = chat(window, loop, "delete me")
    kept = chat(window, loop, "keep me")
    window.workspace.close(gone)
    run_until(loop, lambda: listed_closed(window, gone.session_id))
    sidebar = window.sidebar
    sidebar.undo_bar.timer.setInterval(200)
    menu_pick(window, gone.session_id, "Delete")
    assert gone.session_id not in listed(window)
    assert stored_rows(history_app.db, gone.session_id)[0] is not None
    run_until(loop, lambda: not sidebar.undo_bar.isVisible(), timeout=5)
    assert stored_rows(history_app.db, gone.session_id) == (None, [])
    assert len(stored_rows(history_app.db, kept.session_id)[1]) == 2
    assert listed(window) == [kept.session_id]
    # a second delete does the first one at once
    other = chat(window, loop, "another")
    sidebar.undo_bar.timer.setInterval(60_000)
    run_until(loop, lambda: other.session_id in listed(window))
    menu_pick(window, kept.session_id, "Delete")
    menu_pick(window, other.session_id, "Delete")
    assert stored_rows(history_app.db, kept.session_id) == (None, [])
    assert stored_rows(history_app.db, other.session_id)[0] is not None


def test_a_chat_deleted_in_the_history_dialog_leaves_the_sidebar(history_app, loop, qtbot):
    window = history_app.start()
    conv = chat(window, loop, "listed twice")
    window.workspace.close(conv)
    run_until(loop, lambda: listed_closed(window, conv.session_id))
    window.history.delete("session", conv.session_id)  # as History…'s Delete does
    run_until(loop, lambda: conv.session_id not in listed(window), timeout=2)


def test_the_empty_note_sits_under_the_search_box(history_app, loop, qtbot):
    window = history_app.start()
    sidebar = window.sidebar
    run_until(loop, sidebar.note.isVisible)
    note_top = sidebar.note.mapTo(sidebar, sidebar.note.rect().topLeft()).y()
    search_bottom = sidebar.search.mapTo(sidebar, sidebar.search.rect().bottomLeft()).y()
    assert 0 <= note_top - search_bottom < 20
