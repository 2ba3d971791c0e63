"""The chat tab bar: every tab the same width, so close buttons stay put while the busy
marker comes and goes and titles change (long titles are elided; the tooltip has them)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtWidgets import QTabBar, QWidget

TAB_WIDTH = 180


class ChatTabBar(QTabBar):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setElideMode(Qt.TextElideMode.ElideRight)
        self.setUsesScrollButtons(True)

        self._height = 0  # every tab's height (one font, one style): worked out once

    def tabSizeHint(self, index: int) -> QSize:  # noqa: N802 - Qt override
        # Qt asks for every tab's size at each relayout (a title or busy-marker change): 32
        # calls per change with 16 tabs, each measuring the text it then elides anyway.
        if not self._height:
            self._height = super().tabSizeHint(index).height()
        return QSize(TAB_WIDTH, self._height)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._height = 0
        super().changeEvent(event)

    def minimumTabSizeHint(self, index: int) -> QSize:  # noqa: N802 - Qt override
        return self.tabSizeHint(index)
