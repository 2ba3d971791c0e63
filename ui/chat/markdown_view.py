"""A read-only Markdown view that is exactly as tall as its text (no inner scroll bars)."""

from __future__ import annotations

import math

from PySide6.QtCore import QSizeF, Qt
from PySide6.QtGui import QColor, QTextCursor, QTextDocument, QTextFormat, QWheelEvent
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser, QWidget

CODE_BACKGROUND = QColor("#f1f3f6")


class MarkdownView(QTextBrowser):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setOpenExternalLinks(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self.source_text = ""
        self.num_renders = 0

    def set_markdown(self, text: str) -> None:
        if text == self.source_text:
            return
        self.source_text = text
        self.num_renders += 1
        self.setMarkdown(text)
        style_code_blocks(self.document())

    def _fit(self, size: QSizeF) -> None:
        height = math.ceil(size.height()) + 2 * self.frameWidth()
        if height != self.height():
            self.setFixedHeight(height)

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 - let the list scroll
        event.ignore()


def style_code_blocks(doc: QTextDocument) -> None:
    """Give fenced/indented code a background and let long code lines wrap."""
    cursor = QTextCursor(doc)
    block = doc.begin()
    while block.isValid():
        fmt = block.blockFormat()
        if fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.nonBreakableLines():
            fmt.setBackground(CODE_BACKGROUND)
            fmt.setNonBreakableLines(False)
            cursor.setPosition(block.position())
            cursor.setBlockFormat(fmt)
        block = block.next()
