"""Layout helpers that let docked panels adapt to the width they get instead of forcing
the window (and so the chat) to give them more: a grid that reflows into fewer columns,
and a scroll area for what still does not fit."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QGridLayout, QScrollArea, QWidget


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


def scrolled(widget: QWidget, min_width: int) -> QScrollArea:
    """`widget` in a frameless scroll area at least `min_width` wide: a dock built on it
    can be made narrow and short, and scrolls what its narrow layout still cannot fit."""
    area = QScrollArea()
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setMinimumWidth(min_width)
    return area
