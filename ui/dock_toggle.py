"""A dock's View-menu entry and shortcut that bring it to the front: shown and raised (also
when it is a tab behind another dock) and focused; only a dock already in front closes."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDockWidget, QWidget


def front_toggle(dock: QDockWidget) -> QAction:
    """The dock's own toggle action (its check mark still follows the dock), triggering
    `toggle` instead of Qt's show/close: Qt closes a dock that is open as a tab behind
    another one, so its shortcut seemed to do nothing or close it unseen."""
    action = dock.toggleViewAction()
    action.triggered.disconnect()  # Qt's own connection: close on uncheck
    action.triggered.connect(lambda _checked=False: toggle(dock))
    return action


def in_front(dock: QDockWidget) -> bool:
    """Shown and not a tab hidden behind another dock (that one's geometry covers it)."""
    return not dock.isHidden() and dock.isVisible() and not dock.visibleRegion().isEmpty()


def toggle(dock: QDockWidget) -> None:
    """Closed or behind another dock: show it in front and focus it; in front: close it."""
    if in_front(dock):
        dock.close()
    else:
        dock.show()
        dock.raise_()  # the current tab of a tabified dock area
        if dock.isFloating():
            dock.activateWindow()
        focus_first(dock)
    dock.toggleViewAction().setChecked(not dock.isHidden())


def focus_first(dock: QDockWidget) -> None:
    """Keyboard focus to the first widget in the dock that takes it (Tab order)."""
    start = dock.widget() or dock
    widget: QWidget = start
    while True:
        widget = widget.nextInFocusChain()
        if widget is start or not start.isAncestorOf(widget):
            break
        # a hidden widget (the stats panel's model chooser with one model) takes no focus
        if (widget.isVisible() and widget.isEnabled()
                and widget.focusPolicy() & Qt.FocusPolicy.TabFocus):
            widget.setFocus(Qt.FocusReason.ShortcutFocusReason)
            return
    dock.setFocus(Qt.FocusReason.ShortcutFocusReason)
