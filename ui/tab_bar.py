"""The chat tab bar: every tab the same width, so close buttons stay put while the busy
marker comes and goes and titles change (long titles are elided; the tooltip has them)."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QTabBar, QWidget

TAB_WIDTH = 180


class ChatTabBar(QTabBar):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setElideMode(Qt.TextElideMode.ElideRight)
        self.setUsesScrollButtons(True)

    def tabSizeHint(self, index: int) -> QSize:  # noqa: N802 - Qt override
        return QSize(TAB_WIDTH, super().tabSizeHint(index).height())

    def minimumTabSizeHint(self, index: int) -> QSize:  # noqa: N802 - Qt override
        return self.tabSizeHint(index)
