"""Layout helpers that let docked panels adapt to the width they get instead of forcing
the window (and so the chat) to give them more: a grid that reflows into fewer columns,
a scroll area for what still does not fit, and a dock that opens at the width it asks for
when there is room."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QFrame,
    QGridLayout,
    QLabel,
    QMainWindow,
    QScrollArea,
    QWidget,
)

MIN_SLACK = 8  # px: a dock this close to its minimum width counts as at its minimum


class ReflowGrid(QWidget):
    """Lays `items` out in as many columns (up to `max_columns`) as fit at `column_width`
    each; one column when narrow. Its minimum width is one column's, not all of them."""

    def __init__(self, items: Sequence[QWidget], column_width: int, max_columns: int,
                 spacing: int = 4, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.items = list(items)
        self.column_width = column_width
        self.max_columns = max_columns
        self.columns = 0
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(0, 0, 0, 0)
        self._grid.setSpacing(spacing)
        self._place(1)

    def columns_for(self, width: int) -> int:
        return max(1, min(self.max_columns, len(self.items), width // self.column_width))

    def _place(self, columns: int) -> None:
        if columns == self.columns:
            return
        self.columns = columns
        for item in self.items:
            self._grid.removeWidget(item)
        for i, item in enumerate(self.items):
            self._grid.addWidget(item, i // columns, i % columns,
                                 Qt.AlignmentFlag.AlignTop if columns > 1 else Qt.AlignmentFlag(0))
        for c in range(self.max_columns):
            self._grid.setColumnStretch(c, 1 if c < columns else 0)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._place(self.columns_for(event.size().width()))


def narrow_label(text: str) -> QLabel:
    """A label for a name or number in a docked panel's grid: it wraps at spaces rather
    than set the panel's minimum width to its whole text ("40 KiB of 5.9 GiB" takes
    two lines in a narrow dock, one in a wide one)."""
    label = QLabel(text)
    label.setWordWrap(True)
    return label


def scrolled(widget: QWidget, min_width: int) -> QScrollArea:
    """`widget` in a frameless scroll area at least `min_width` wide: a dock built on it
    can be made narrow and short, and scrolls what its narrow layout still cannot fit."""
    area = QScrollArea()
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setMinimumWidth(min_width)
    return area


def widen_when_shown(window: QMainWindow, dock: QDockWidget) -> None:
    """Each time `dock` is shown beside the central widget at its bare minimum width, give
    it the width it asks for. A restored layout (Qt's saveState) holds a dock that was never
    shown at its minimum, where a panel's numbers or form fields sit behind a horizontal
    scroll bar although the window has room. The central widget keeps its own minimum (Qt
    takes the dock's extra width from what the chat can spare), and a width the user chose
    above the minimum is kept."""

    def check() -> None:
        area = window.dockWidgetArea(dock)
        if dock.isFloating() or not dock.isVisible() or area not in (
                Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea):
            return
        if dock.width() <= dock.minimumSizeHint().width() + MIN_SLACK:
            window.resizeDocks([dock], [dock.sizeHint().width()], Qt.Orientation.Horizontal)

    # after the show: the panel is built then, and the main window has laid the dock out
    dock.visibilityChanged.connect(lambda visible: visible and QTimer.singleShot(0, check))
