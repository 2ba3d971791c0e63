"""Issue #46 items 21 and 26 (rename): F2 then Esc (a cancelled rename) leaves the window's
shortcuts working at once, without a click; the tab's and the sidebar's rename dialogs say
the same thing ("Rename chat", "Title:") and are wide enough for their title."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QInputDialog
from pytestqt.qtbot import QtBot

from tests.ui.conftest import run_until
from ui.rename_dialog import LABEL, MIN_WIDTH, TITLE

CTRL = Qt.KeyboardModifier.ControlModifier


def _activate(window, loop) -> None:
    window.activateWindow()
    run_until(loop, lambda: QApplication.activeWindow() is window, timeout=2)


def _key(key, modifiers=Qt.KeyboardModifier.NoModifier) -> None:
    """A key press where the user's would go: the focus widget, else the active window."""
    target = QApplication.focusWidget() or QApplication.activeWindow()
    assert target is not None, "no window takes the keys"
    QtBot.keyClick(target, key, modifiers)


def _open_dialog(loop) -> QInputDialog:
    dialog = next(w for w in QApplication.topLevelWidgets()
                  if isinstance(w, QInputDialog) and w.isVisible())
    run_until(loop, lambda: QApplication.activeWindow() is dialog, timeout=2)
    return dialog


def test_f2_then_esc_leaves_the_shortcuts_working(window, loop, qtbot):
    first = window.current_tab()
    _activate(window, loop)
    first.input.setFocus()
    _key(Qt.Key.Key_F2)
    dialog = _open_dialog(loop)
    assert dialog.windowTitle() == TITLE and dialog.labelText() == LABEL
    assert dialog.textValue() == first.conversation.title
    assert dialog.width() >= MIN_WIDTH
    _key(Qt.Key.Key_Escape)  # cancelled
    assert not dialog.isVisible()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is first.input, timeout=2000)
    _key(Qt.Key.Key_T, CTRL)  # no click in between: Ctrl+T opens a tab at once
    assert len(window.chat_tabs()) == 2
    second = window.current_tab()
    assert second is not first and QApplication.focusWidget() is second.input
    _key(Qt.Key.Key_F2)  # and OK renames, the keys back as well
    dialog = _open_dialog(loop)
    dialog.setTextValue("Renamed")
    _key(Qt.Key.Key_Return)
    assert second.conversation.title == "Renamed"
    qtbot.waitUntil(lambda: QApplication.focusWidget() is second.input, timeout=2000)
    _key(Qt.Key.Key_1, CTRL)
    assert window.current_tab() is first


def test_the_sidebar_renames_with_the_same_dialog(history_app, loop, qtbot):
    window = history_app.start()
    tab = window.current_tab()
    tab.send_text("a chat to rename")
    run_until(loop, lambda: not tab.conversation.is_busy)
    view = window.sidebar.list
    run_until(loop, lambda: view.item_for(tab.conversation.session_id) is not None)
    _activate(window, loop)
    view.setCurrentItem(view.item_for(tab.conversation.session_id))
    view.setFocus()
    _key(Qt.Key.Key_F2)
    dialog = _open_dialog(loop)
    assert dialog is window.sidebar.actions.rename_dialog
    assert (dialog.windowTitle(), dialog.labelText()) == (TITLE, LABEL)
    assert dialog.width() >= MIN_WIDTH
    _key(Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is view, timeout=2000)
    _key(Qt.Key.Key_T, CTRL)
    assert len(window.chat_tabs()) == 2
