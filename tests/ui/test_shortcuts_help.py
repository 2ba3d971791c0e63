"""Issue #46 item 26 (help): Help → Keyboard shortcuts lists every key of the window's menus
and shortcuts (it lacked Ctrl+Shift+A and Ctrl+PgUp / Ctrl+PgDown)."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication, QMessageBox

from tests.ui.conftest import run_until
from ui.menus import TABLE

SAID_AS = {"Ctrl+Shift+Backtab": "Ctrl+Shift+Tab"}  # how a person presses it
IN_A_RANGE = {f"Ctrl+{n}" for n in range(2, 8)}  # "Ctrl+1 … Ctrl+8"


def test_the_help_lists_every_shortcut(window, loop, qtbot):
    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    window.activateWindow()
    run_until(loop, lambda: QApplication.activeWindow() is window, timeout=2)
    next(a for a in help_menu.actions() if a.text() == "&Keyboard shortcuts").trigger()
    box = window.findChild(QMessageBox, "shortcutsBox")
    assert box is not None and box.isVisible()
    text = box.text()
    missing = [key for entry in TABLE for key in entry.keys
               if key not in IN_A_RANGE and SAID_AS.get(key, key) not in text]
    assert missing == []
    box.close()
