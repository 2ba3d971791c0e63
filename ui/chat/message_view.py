"""The conversation view: one MessageWidget per message in a scroll area that follows the
newest text while the user is at the bottom."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication, QShowEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.conversation import FINISH_NOTES, ChatMessage

from .markdown_view import MarkdownView


def stats_text(msg: ChatMessage) -> str:
    if msg.streaming:
        return "generating …"
    if msg.stats is None:
        if msg.finish_reason == "interrupted":  # restored from the history, never finished
            return FINISH_NOTES["interrupted"]
        return msg.finish_reason or ""
    text = msg.stats.summary()
    note = FINISH_NOTES.get(msg.finish_reason or "")
    if msg.finish_reason == "error":
        note = f"error: {msg.error or 'unknown'}"
    return f"{text}  —  {note}" if note else text


class MessageWidget(QFrame):
    """Role header, Markdown body, and (for replies) a stats line. Renders only when visible:
    text that streams into a hidden tab is drawn once, when the tab is shown."""

    edit_requested = Signal(int)

    def __init__(self, index: int, message: ChatMessage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.index = index
        self.message = message
        self.setObjectName("userMessage" if message.role == "user" else "assistantMessage")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(4)
        header = QHBoxLayout()
        role = QLabel("You" if message.role == "user" else "Assistant")
        role.setObjectName("roleLabel")
        header.addWidget(role)
        header.addStretch(1)
        if message.role == "user":
            self.edit_button = QPushButton("Edit")
            self.edit_button.setObjectName("flatButton")
            self.edit_button.setToolTip("Edit this message and resend from here")
            self.edit_button.clicked.connect(lambda: self.edit_requested.emit(self.index))
            header.addWidget(self.edit_button)
        else:
            self.copy_button = copy = QPushButton("Copy")
            copy.setObjectName("flatButton")
            copy.clicked.connect(
                lambda: QGuiApplication.clipboard().setText(self.message.content))
            header.addWidget(copy)
        layout.addLayout(header)
        self.body = MarkdownView(self)
        layout.addWidget(self.body)
        self.stats = QLabel()
        self.stats.setObjectName("statsLabel")
        self.stats.setVisible(message.role == "assistant")
        self.stats.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # Wraps: unwrapped, a long line ("85 of 110 prompt tokens cached") sets the whole
        # chat's minimum width, and a narrow tab (stats dock open) cuts every message off.
        self.stats.setWordWrap(True)
        layout.addWidget(self.stats)
        self._dirty = True
        self.refresh()

    def refresh(self) -> None:
        """Show the message's current state (deferred while hidden)."""
        self._dirty = True
        if self.isVisible() or not self.body.source_text:
            self._render()

    def _render(self) -> None:
        self._dirty = False
        msg = self.message
        if msg.content or not msg.streaming:
            self.body.set_markdown(msg.content)
        else:  # never a silent wait: where the request stands until its first token
            self.body.set_markdown(f"*{msg.wait_note}*" if msg.wait_note else "…")
        self.stats.setText(stats_text(msg))
        failed = msg.finish_reason in ("error", "context")
        self.stats.setProperty("failed", "true" if failed else "false")
        self.stats.style().unpolish(self.stats)
        self.stats.style().polish(self.stats)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if self._dirty:
            self._render()


class MessageList(QScrollArea):
    edit_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("messageList")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.Shape.NoFrame)
        inner = QWidget()
        inner.setObjectName("messageListInner")
        self._layout = QVBoxLayout(inner)
        self._layout.setContentsMargins(16, 12, 16, 12)
        self._layout.setSpacing(10)
        self.placeholder = QLabel("Start the conversation below.")
        self.placeholder.setObjectName("placeholder")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._layout.addWidget(self.placeholder)
        self._layout.addStretch(1)
        self.setWidget(inner)
        self.widgets: list[MessageWidget] = []
        self._stick = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)

    def set_messages(self, messages: list[ChatMessage]) -> None:
        for w in self.widgets:
            w.setParent(None)
            w.deleteLater()
        self.widgets.clear()
        for i in range(len(messages)):
            self.add(i, messages[i])
        self.placeholder.setVisible(not messages)

    def add(self, index: int, message: ChatMessage) -> None:
        widget = MessageWidget(index, message)
        widget.edit_requested.connect(self.edit_requested)
        self._layout.insertWidget(self._layout.count() - 1, widget)
        self.widgets.append(widget)
        self.placeholder.hide()
        self._stick = True

    def refresh(self, index: int) -> None:
        if 0 <= index < len(self.widgets):
            self.widgets[index].refresh()

    def _on_scrolled(self, value: int) -> None:
        self._stick = value >= self.verticalScrollBar().maximum() - 24

    def _on_range(self, _lo: int, hi: int) -> None:
        if self._stick:
            self.verticalScrollBar().setValue(hi)
