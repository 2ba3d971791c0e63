"""Issue #46 item 20: the Compare window takes the keyboard when it opens (Ctrl+Shift+C):
what is typed goes into its message box, and Enter no longer sends the draft in the tab
behind it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from tests.ui.conftest import run_until
from ui.compare.dialog import CompareDialog


def _key(key, modifiers=Qt.KeyboardModifier.NoModifier) -> None:
    """A key press where the user's would go: the focus widget, else the active window."""
    target = QApplication.focusWidget() or QApplication.activeWindow()
    assert target is not None, "no window takes the keys"
    QtBot.keyClick(target, key, modifiers)


def test_compare_takes_the_keys(window, loop, qtbot, monkeypatch):
    tab = window.current_tab()
    shown = CompareDialog.show

    def show_as_x_does(dialog: CompareDialog) -> None:
        """Offscreen makes every window shown active; X without a window manager's help
        does not: the window behind keeps the keys until the new one asks for them."""
        shown(dialog)
        QApplication.processEvents()
        window.activateWindow()
        QApplication.processEvents()

    monkeypatch.setattr(CompareDialog, "show", show_as_x_does)
    window.activateWindow()
    run_until(loop, lambda: QApplication.activeWindow() is window, timeout=2)
    tab.input.setFocus()
    qtbot.keyClicks(tab.input, "draft")
    _key(Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    dialog = tab.findChild(CompareDialog)
    assert dialog is not None and dialog.isVisible()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=2000)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is dialog.message_box, timeout=2000)
    qtbot.keyClicks(QApplication.focusWidget(), " and more")
    _key(Qt.Key.Key_Return)
    assert dialog.message_box.toPlainText().startswith("draft and more")  # at its end
    assert tab.input.toPlainText() == "draft"  # nothing typed or sent behind it
    assert len(tab.conversation.messages) == 0
    dialog.close()
