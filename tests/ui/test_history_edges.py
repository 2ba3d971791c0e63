"""History rough edges: an imported chat is listed "(open)" only when a tab shows it; a
delete asks first (naming the chat, saying its tab closes), Enter confirms and Esc
cancels, and the closed tab is said out loud."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from tests.ui.conftest import run_until, start_long_reply
from tests.ui.history_checks import stored


def _chat(window, loop, qtbot, text: str) -> str:
    tab = window.current_tab()
    qtbot.keyClicks(tab.input, text)
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: not tab.conversation.is_busy)
    return tab.conversation.session_id


def _listed_open(view) -> dict[str, bool]:
    """Each chat's id: whether its Kind column says "(open)"."""
    out = {}
    for i in range(view.list.topLevelItemCount()):
        item = view.list.topLevelItem(i)
        entry = item.data(0, Qt.ItemDataRole.UserRole)
        if entry.kind == "session":
            out[entry.id] = "(open)" in item.text(1)
    return out


def _tabs(window) -> set[str]:
    return {t.conversation.session_id for t in window.chat_tabs()}


def test_an_imported_chat_is_listed_open_only_with_a_tab(history_app, loop, qtbot, tmp_path):
    window = history_app.start()
    session = _chat(window, loop, qtbot, "remember the lighthouse")
    view = window.history.show_history()
    path = tmp_path / "all.json"
    assert view.export("everything", "json", str(path))
    assert json.loads(path.read_text())["sessions"][0]["is_open"]  # open when exported
    history_app.stop()

    history_app.db = tmp_path / "other.db"
    window = history_app.start()
    view = window.history.show_history()
    assert view.import_json(str(path))
    listed = _listed_open(view)
    assert session in listed
    # the list and the tabs agree: "(open)" exactly for the chats a tab shows
    assert {sid for sid, is_open in listed.items() if is_open} == _tabs(window) & set(listed)
    assert not listed[session]
    assert view.selected() is not None and view.selected().id == session  # ready to open
    assert "Open in tab" in view.message.text()
    view.open_button.click()
    assert window.current_tab().conversation.session_id == session
    assert _listed_open(view)[session]

    tabs_before = _tabs(window)
    history_app.stop()  # and a restart brings back the same tabs, no more
    window = history_app.start()
    assert _tabs(window) == tabs_before


def test_deleting_an_open_chat_says_its_tab_closes(history_app, loop, qtbot):
    window = history_app.start()
    session = _chat(window, loop, qtbot, "the chat to delete")
    title = window.current_tab().conversation.title
    window.new_tab()
    view = window.history.show_history()
    assert view.select(session)
    box = view.delete_selected()
    assert box is not None and box.isVisible()
    assert f"\u201c{title}\u201d" in box.text()
    assert "tab" in box.text() and "close" in box.text()
    box.button(QMessageBox.StandardButton.Yes).click()
    assert session not in _tabs(window)
    assert stored(history_app.db).get_session(session) is None
    # the tab's closing is said, in the dialog and in the status bar
    assert f"Deleted \u201c{title}\u201d" in view.message.text()
    assert "tab" in view.message.text()
    assert f"Deleted \u201c{title}\u201d" in window.statusBar().currentMessage()


def test_a_closed_chat_delete_does_not_mention_a_tab(history_app, loop, qtbot):
    window = history_app.start()
    session = _chat(window, loop, qtbot, "a closed chat")
    window.new_tab()
    window.close_tab(0)
    view = window.history.show_history()
    assert view.select(session)
    box = view.delete_selected()
    assert "tab" not in box.text()
    box.reject()


def test_enter_confirms_a_delete_and_escape_cancels(history_app, loop, qtbot):
    window = history_app.start()
    session = _chat(window, loop, qtbot, "enter deletes me")
    window.new_tab()
    view = window.history.show_history()
    assert view.select(session)
    box = view.delete_selected()
    qtbot.keyClick(box, Qt.Key.Key_Escape)
    assert not box.isVisible()
    assert stored(history_app.db).get_session(session) is not None

    assert view.select(session)
    box = view.delete_selected()
    label = box.button(QMessageBox.StandardButton.Yes).text()
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert stored(history_app.db).get_session(session) is None
    assert session not in _tabs(window)
    assert label == "Delete"  # what Enter does, said on its button


def test_deleting_a_generating_chat_says_its_reply_stops(history_app, loop, qtbot):
    window = history_app.start()
    tab = window.current_tab()
    gen = start_long_reply(tab, loop, "a long reply to delete")
    session = tab.conversation.session_id
    window.new_tab()
    view = window.history.show_history()
    assert view.select(session)
    box = view.delete_selected()
    assert "the reply it is writing stops" in box.text()
    box.button(QMessageBox.StandardButton.Yes).click()
    run_until(loop, lambda: gen.is_finished)
    assert gen.finish_reason == "cancelled" and session not in _tabs(window)
    history_app.history.flush()
    assert stored(history_app.db).get_session(session) is None
