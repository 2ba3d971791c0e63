"""Window rough edges: the dock shortcuts bring their dock to the front (also when it is a
tab behind the other dock) and focus it; after the History or model dialog closes the
window's shortcuts work at once; a request cancelled by closing its tab reads so in the
stats, named after its chat, and the chat comes back where its tab was."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QDialog, QTableView
from pytestqt.qtbot import QtBot

from tests.ui.conftest import run_until, spin, start_long_reply

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def _activate(window, loop) -> None:
    window.activateWindow()
    run_until(loop, lambda: QApplication.activeWindow() is window, timeout=2)


def _key(key, modifiers) -> None:
    """A key press where the user's would go: the focus widget, else the active window."""
    target = QApplication.focusWidget() or QApplication.activeWindow()
    assert target is not None, "no window takes the keys"
    QApplication.processEvents()
    QtBot.keyClick(target, key, modifiers)


def _settle(loop) -> None:
    for _ in range(5):
        QApplication.processEvents()
        spin(loop, 0.02)


def _in_front(dock) -> bool:
    """Shown and not a tab hidden behind the other dock."""
    return not dock.isHidden() and dock.isVisible() and not dock.visibleRegion().isEmpty()


def test_dock_shortcuts_bring_their_dock_to_the_front(window, loop, qtbot):
    _activate(window, loop)
    stats, sim = window.stats_dock, window.sim_dock
    _key(Qt.Key.Key_S, CTRL | SHIFT)
    _settle(loop)
    assert _in_front(stats)
    _key(Qt.Key.Key_L, CTRL | SHIFT)  # tabified with the stats: comes in front of them
    _settle(loop)
    assert _in_front(sim) and not _in_front(stats)
    assert not stats.isHidden()  # still open, a tab behind
    assert sim.isAncestorOf(QApplication.focusWidget())
    assert window.actions_by_name["simulator"].isChecked()
    _key(Qt.Key.Key_S, CTRL | SHIFT)  # the stats, behind: brought back, not closed
    _settle(loop)
    assert _in_front(stats) and not _in_front(sim) and not sim.isHidden()
    assert stats.isAncestorOf(QApplication.focusWidget())
    assert window.actions_by_name["stats"].isChecked()
    _key(Qt.Key.Key_S, CTRL | SHIFT)  # in front: the shortcut closes it
    _settle(loop)
    assert stats.isHidden() and not window.actions_by_name["stats"].isChecked()
    assert _in_front(sim)
    _key(Qt.Key.Key_L, CTRL | SHIFT)
    _settle(loop)
    assert sim.isHidden() and not window.actions_by_name["simulator"].isChecked()
    window.actions_by_name["simulator"].trigger()  # the menu entry does the same
    _settle(loop)
    assert _in_front(sim) and window.actions_by_name["simulator"].isChecked()


def _shortcuts_work(window, loop) -> None:
    """Ctrl+4, Ctrl+W and Ctrl+Shift+S do their thing right away."""
    _settle(loop)
    assert QApplication.activeWindow() is window
    assert window.focusWidget() is window.current_tab().input
    _key(Qt.Key.Key_4, CTRL)
    assert window.tabs.currentIndex() == 3
    count = window.tabs.count()
    _key(Qt.Key.Key_W, CTRL)
    assert window.tabs.count() == count - 1
    stats_shown = not window.stats_dock.isHidden()
    _key(Qt.Key.Key_S, CTRL | SHIFT)
    assert window.stats_dock.isHidden() == stats_shown


def test_shortcuts_work_after_the_history_dialog_closes(history_app, loop, qtbot):
    window = history_app.start()
    for _ in range(5):
        window.new_tab()
    _activate(window, loop)
    _key(Qt.Key.Key_H, CTRL)
    view = window.history.dialog
    assert view is not None and view.isVisible()
    run_until(loop, lambda: QApplication.activeWindow() is view, timeout=2)
    qtbot.keyClick(view, Qt.Key.Key_Escape)
    assert not view.isVisible()
    _shortcuts_work(window, loop)


@pytest.mark.parametrize(("key", "title"), [
    # the model dialog: the picker today, the "Model library" (h32-models) after it
    (Qt.Key.Key_O, ("Load a model", "Model library")), (Qt.Key.Key_K, ("Connections",))],
    ids=["model", "connections"])
def test_shortcuts_work_after_a_dialog_closes(window, loop, qtbot, key, title):
    for _ in range(5):
        window.new_tab()
    _activate(window, loop)
    _key(key, CTRL if key == Qt.Key.Key_O else CTRL | SHIFT)
    dialog = next(d for d in window.findChildren(QDialog) if d.isVisible())
    assert dialog.windowTitle().startswith(title)  # a tuple: any of them
    run_until(loop, lambda: QApplication.activeWindow() is dialog, timeout=2)
    _key(Qt.Key.Key_Escape, Qt.KeyboardModifier.NoModifier)
    assert not dialog.isVisible()
    _shortcuts_work(window, loop)


def _row(window, request_id: str):
    window.stats_dock.refresh(poll=True)
    return next(r for r in window.stats_dock.model.rows if r.request_id == request_id)


def test_a_request_cancelled_by_closing_its_tab_reads_so(window, loop, qtbot):
    window.stats_dock.show()
    first = window.current_tab()
    tab = window.new_tab()
    window.new_tab()
    gen = start_long_reply(tab, loop, "a long answer please")
    title = tab.conversation.title
    assert _row(window, gen.request_id).source == title
    window.close_tab(window.tabs.indexOf(tab))
    run_until(loop, lambda: gen.is_finished)
    row = _row(window, gen.request_id)
    assert (row.source, row.state, row.finish_reason) == (f"{title} (closed)", "cancelled",
                                                          "cancelled")
    window.tabs.setCurrentIndex(0)
    back = window.reopen_closed_tab()
    assert window.tabs.indexOf(back) == 1  # where its tab was, not at the end
    assert window.chat_tabs()[0] is first
    assert _row(window, gen.request_id).source == title  # its chat is open again
    window.set_tab_title(back, "Renamed")
    assert _row(window, gen.request_id).source == "Renamed"


def test_a_closed_chat_source_keeps_its_closed_mark_in_a_narrow_column(window, loop, qtbot):
    window.stats_dock.show()
    tab = window.new_tab()
    gen = start_long_reply(tab, loop, "tell me everything about lighthouses and their keepers")
    window.close_tab(window.tabs.indexOf(tab))
    run_until(loop, lambda: gen.is_finished)
    row = _row(window, gen.request_id)
    dock = window.stats_dock
    dock.refresh()
    _settle(loop)
    view = dock.panel.findChild(QTableView, "requestTable")
    at = dock.panel.table_model.rows.index(row)
    index = view.model().index(at, 0)
    width = view.columnWidth(0)
    assert view.fontMetrics().horizontalAdvance(row.source) > width  # it is cut
    shown = view.fontMetrics().elidedText(row.source, view.textElideMode(), width - 8)
    assert shown.endswith("(closed)")  # the end stays: the middle goes
    assert row.source in view.model().data(index, Qt.ItemDataRole.ToolTipRole)
