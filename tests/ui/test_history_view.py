"""The history view: list, full-text search, open a past chat in a tab and go on with it,
delete with confirmation."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMessageBox

from app.storage import SimResult, SimRun
from tests.ui.conftest import run_until
from tests.ui.history_checks import assert_tab_saved, stored


def send(qtbot, tab, text: str) -> None:
    qtbot.keyClicks(tab.input, text)
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)


def past_chat(window, loop, qtbot, text: str) -> str:
    tab = window.new_tab()
    send(qtbot, tab, text)
    run_until(loop, lambda: not tab.conversation.is_busy)
    session_id = tab.conversation.session_id
    window.close_tab(window.tabs.indexOf(tab))
    return session_id


def test_search_open_and_continue_a_past_chat(history_app, loop, qtbot):
    window = history_app.start()
    old = past_chat(window, loop, qtbot, "tell me about zeppelins")
    other = past_chat(window, loop, qtbot, "tell me about submarines")
    s = history_app.store
    s.save_sim_run(SimRun(title="Load test", config={"tabs": 8}))
    window.activateWindow()  # closing the focused tab left no active window (offscreen)
    run_until(loop, lambda: QApplication.activeWindow() is window, timeout=2)
    qtbot.keyClick(window, Qt.Key.Key_H, Qt.KeyboardModifier.ControlModifier)
    view = window.history.dialog
    assert view is not None and view.isVisible()
    kinds = [(e.kind, e.id) for e in view.entries]
    assert kinds[:2] == [("session", other), ("session", old)]  # most recent first
    assert ("sim_run", s.reader.list_sim_runs()[0].id) in kinds

    view.search.setText("zeppelin")
    assert [e.id for e in view.entries] == [old]
    assert "\x02zeppelins\x03" in view.entries[0].snippet  # marked, for the bold match
    view.open_selected()
    tab = window.current_tab()
    assert tab.conversation.session_id == old
    assert tab.conversation.messages[0].content == "tell me about zeppelins"
    assert stored(history_app.db).get_session(old).is_open
    view.open_selected()  # already open: switches to it instead of a second tab
    assert sum(t.conversation.session_id == old for t in window.chat_tabs()) == 1

    send(qtbot, tab, "and airships?")
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert len(tab.conversation.messages) == 4
    assert_tab_saved(history_app.db, tab)


def test_delete_asks_first(history_app, loop, qtbot):
    window = history_app.start()
    victim = past_chat(window, loop, qtbot, "forget me")
    keep = past_chat(window, loop, qtbot, "keep me")
    history_app.store.save_sim_run(SimRun(title="Old run"))
    run = history_app.history.reader.list_sim_runs()[0]
    history_app.store.add_sim_results([SimResult(sim_run_id=run.id, seq=0, prompt="p")])
    view = window.history.show_history()
    assert view.select(victim)
    box = view.delete_selected()
    assert box is not None and box.isVisible()
    box.button(QMessageBox.StandardButton.Cancel).click()
    assert stored(history_app.db).get_session(victim) is not None

    assert view.select(victim)
    view.delete_selected().button(QMessageBox.StandardButton.Yes).click()
    s = stored(history_app.db)
    assert s.get_session(victim) is None and s.get_session(keep) is not None
    assert victim not in [e.id for e in view.entries]

    # A chat open in a tab: deleting closes its tab.
    window.history.open_session(keep)
    assert view.select(keep)
    view.delete_selected().button(QMessageBox.StandardButton.Yes).click()
    assert keep not in [t.conversation.session_id for t in window.chat_tabs()]
    assert stored(history_app.db).get_session(keep) is None

    assert view.select(run.id)
    view.delete_selected().button(QMessageBox.StandardButton.Yes).click()
    assert stored(history_app.db).list_sim_runs() == []
