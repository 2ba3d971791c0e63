"""A read-only Markdown view that is exactly as tall as its text (no vertical scroll bar).

Its text wraps to the view's width, code blocks too; a view made with `code_scrolls=True`
(a reply's code block: ui/chat/reply_body.py) does not wrap its code: a line wider than the
view gives it a horizontal scroll bar (with room of its own below the text), moved by
dragging it, a sideways wheel or Shift+wheel. An upright wheel always scrolls the chat."""

from __future__ import annotations

import math

from PySide6.QtCore import QSizeF, Qt, QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QDesktopServices,
    QGuiApplication,
    QResizeEvent,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextFrameFormat,
    QTextTable,
    QWheelEvent,
)
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser, QWidget

from ..theme import is_dark
from .code_blocks import COPY_SCHEME, CodeBlock, highlight

CODE_BACKGROUND = QColor("#f1f3f6")
CODE_BACKGROUND_DARK = QColor("#2a2e34")
LINK_LIGHT, LINK_DARK = QColor("#1a73e8"), QColor("#8ab4f8")


class MarkdownView(QTextBrowser):
    """`copied(what)` fires after a code block was copied (its language or "code")."""

    copied = Signal(str)

    def __init__(self, parent: QWidget | None = None, code_scrolls: bool = False) -> None:
        super().__init__(parent)
        self.code_scrolls = code_scrolls
        self.setProperty("code", "true" if code_scrolls else "false")  # shaded (stylesheet)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded if code_scrolls
                                          else Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setOpenLinks(False)  # copy-code links are ours; web links open in a browser
        self.anchorClicked.connect(self._link_clicked)
        self.code_blocks: list[CodeBlock] = []
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().setDocumentMargin(2)
        self.document().setUndoRedoEnabled(False)  # read-only: an undo stack is pure cost
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fitting = True
        self.source_text = ""
        self.num_renders = 0

    def set_markdown(self, text: str) -> None:
        if text == self.source_text:
            return
        self.source_text = text
        self.num_renders += 1
        doc = self.document()
        # One layout and one height change per render, not one per formatting step (the
        # height change relays out the whole message list: it was most of a render's time).
        self._fitting = False
        try:
            self.setMarkdown(text)
            edit = QTextCursor(doc)
            edit.beginEditBlock()
            dark = is_dark()
            style_code_blocks(doc, CODE_BACKGROUND_DARK if dark else CODE_BACKGROUND,
                              wrap=not self.code_scrolls)
            style_tables(doc)
            self.code_blocks = highlight(doc, "github-dark" if dark else "default",
                                         LINK_DARK if dark else LINK_LIGHT)
            edit.endEditBlock()
        finally:
            self._fitting = True
        self._fit(doc.documentLayout().documentSize())

    def rerender(self) -> None:
        """Render the same text again (the look changed)."""
        text, self.source_text = self.source_text, ""
        self.set_markdown(text)

    def copy_code(self, index: int) -> str:
        """Put code block `index` on the clipboard; returns its text."""
        code = self.code_blocks[index]
        QGuiApplication.clipboard().setText(code.text)
        self.copied.emit(code.language or "code")
        return code.text

    def _link_clicked(self, url: QUrl) -> None:
        if url.scheme() == COPY_SCHEME:
            index = int(url.path()) if url.path().isdigit() else -1
            if 0 <= index < len(self.code_blocks):
                self.copy_code(index)
        else:
            QDesktopServices.openUrl(url)

    def _fit(self, size: QSizeF) -> None:
        if not self._fitting:
            return
        height = math.ceil(size.height()) + 2 * self.frameWidth()
        # A code line wider than the view: the horizontal bar takes room of its own, so it
        # covers no text. (The width is the viewport's whatever the height: no feedback.)
        if self.code_scrolls and size.width() > self.viewport().width() + 0.5:
            height += self.horizontalScrollBar().sizeHint().height()
        if height != self.height():
            self.setFixedHeight(height)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        # a narrower view can make a code line overflow (a wider one end it) while the
        # document's size change, reported before the scroll bar is laid out, was missed
        self._fit(self.document().documentLayout().documentSize())

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 - Qt override
        """A sideways wheel (or Shift+wheel) scrolls a long code line; an upright one is
        left to the chat's list, which scrolls the messages."""
        delta = event.angleDelta()
        sideways = delta.x() != 0 or bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        bar = self.horizontalScrollBar()
        if self.code_scrolls and sideways and bar.maximum() > 0:
            step = delta.x() or delta.y()
            bar.setValue(bar.value() - step * bar.singleStep() // 40)
            event.accept()
            return
        event.ignore()


def style_code_blocks(doc: QTextDocument, background: QColor = CODE_BACKGROUND,
                      wrap: bool = True) -> None:
    """Give fenced/indented code a background; its long lines wrap, or (`wrap=False`)
    stay whole, for a view that scrolls sideways."""
    cursor = QTextCursor(doc)
    block = doc.begin()
    while block.isValid():
        fmt = block.blockFormat()
        if fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.nonBreakableLines():
            fmt.setBackground(background)
            fmt.setNonBreakableLines(not wrap)
            cursor.setPosition(block.position())
            cursor.setBlockFormat(fmt)
        block = block.next()


TABLE_BORDER = QColor("#d0d4d9")


def style_tables(doc: QTextDocument) -> None:
    """Markdown tables with thin borders and some room in the cells."""
    for frame in doc.rootFrame().childFrames():
        if isinstance(frame, QTextTable):
            fmt = frame.format()
            fmt.setBorder(1)
            fmt.setBorderBrush(TABLE_BORDER)
            fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
            fmt.setBorderCollapse(True)
            fmt.setCellPadding(4)
            fmt.setCellSpacing(0)
            frame.setFormat(fmt)
