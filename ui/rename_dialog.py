"""The one "Rename chat" dialog, for a tab (F2, a double-click) and a sidebar row: the same
wording in both, wide enough for its title and a long chat title, and the keys back where
they were once it closes (a cancelled rename left no window taking the shortcuts)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QInputDialog, QLineEdit, QWidget
from shiboken6 import isValid

TITLE = "Rename chat"
LABEL = "Title:"
MIN_WIDTH = 420  # the window title in view, and a title of a few dozen characters


def ask_rename(parent: QWidget, current: str, rename: Callable[[str], object]) -> QInputDialog:
    """Open the dialog over `parent` with `current` to edit; `rename(text)` on OK. Never
    exec(): qasync runs this loop."""
    had_keys = QApplication.focusWidget()
    dialog = QInputDialog(parent)
    dialog.setObjectName("renameDialog")
    dialog.setWindowTitle(TITLE)
    dialog.setLabelText(LABEL)
    dialog.setTextEchoMode(QLineEdit.EchoMode.Normal)
    dialog.setTextValue(current)
    field = dialog.findChild(QLineEdit)  # the dialog's layout fixes its own minimum size
    if field is not None:
        field.setMinimumWidth(MIN_WIDTH)
    dialog.textValueSelected.connect(rename)
    dialog.finished.connect(lambda _result: _keys_back(parent, had_keys))
    dialog.open()
    return dialog


def _keys_back(parent: QWidget, had_keys: QWidget | None) -> None:
    """The window takes the keys again, in the widget that had them (OK or Esc alike)."""
    if not isValid(parent):
        return
    window = parent.window()
    window.activateWindow()
    if had_keys is not None and isValid(had_keys) and had_keys.window() is window \
            and had_keys.isVisible():
        had_keys.setFocus(Qt.FocusReason.ActiveWindowFocusReason)
