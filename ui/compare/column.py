"""One column of the compare view: a target's label and model, its reply as it streams, the
stats line as the chat tab shows it, and "Continue with this answer"."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import QFrame, QLabel, QPushButton, QScrollArea, QVBoxLayout, QWidget

from app.conversation import ChatMessage, ReplyTarget
from app.reasoning.reply import thinking_live

from ..chat.markdown_view import MarkdownView
from ..chat.message_view import stats_text
from ..chat.render_throttle import RenderThrottle
from ..chat.thinking_block import ThinkingBlock
from ..widgets import ElidedLabel

COLUMN_MIN_WIDTH = 180  # four columns still fit a 900 px window


class ReplyColumn(QFrame):
    """`continue_requested(message)` when its button is pressed. `message` is None for a
    target that was refused (its reason is shown instead)."""

    continue_requested = Signal(object)

    def __init__(self, target: ReplyTarget, message: ChatMessage | None,
                 refused: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("compareColumn")
        self.setMinimumWidth(COLUMN_MIN_WIDTH)
        self.target = target
        self.message = message
        self.refused = refused
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.setSpacing(4)
        self.title = ElidedLabel(target.label)
        self.title.setObjectName("roleLabel")
        self.model = ElidedLabel(message.answered_by if message is not None else "")
        self.model.setObjectName("statsLabel")
        layout.addWidget(self.title)
        layout.addWidget(self.model)

        self.thinking = ThinkingBlock()  # a reasoning model's thinking, folded
        self.body = MarkdownView()
        self.scroll = QScrollArea()
        self.scroll.setObjectName("compareScroll")
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        inner = QWidget()
        inner.setObjectName("compareInner")
        col = QVBoxLayout(inner)
        col.setContentsMargins(0, 0, 0, 0)
        col.addWidget(self.thinking)
        col.addWidget(self.body)
        col.addStretch(1)
        self.scroll.setWidget(inner)
        layout.addWidget(self.scroll, 1)
        bar = self.scroll.verticalScrollBar()
        self._stick = True  # follow the newest text while the user is at the bottom
        bar.valueChanged.connect(lambda v: setattr(self, "_stick", v >= bar.maximum() - 24))
        bar.rangeChanged.connect(lambda _lo, hi: bar.setValue(hi) if self._stick else None)

        self.stats = QLabel()
        self.stats.setObjectName("statsLabel")
        self.stats.setWordWrap(True)
        self.stats.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.stats)
        self.continue_button = QPushButton("Continue with this answer")
        self.continue_button.setObjectName("continueButton")
        self.continue_button.setToolTip("Show this answer in the tab and go on from it "
                                        "(the others stay as versions)")
        self.continue_button.clicked.connect(lambda: self.continue_requested.emit(self.message))
        layout.addWidget(self.continue_button)
        self.throttle = RenderThrottle(self.render, self)
        self.render()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        super().changeEvent(event)
        if event.type() == QEvent.Type.StyleChange:  # the look changed: code colours too
            self.body.rerender()

    @property
    def text(self) -> str:
        """The reply's Markdown as shown (what the message holds once rendered)."""
        return self.body.source_text

    def refresh(self) -> None:
        """The message changed: render now, or soon while it streams (at most 30 a second)."""
        msg = self.message
        if msg is not None and msg.streaming and (msg.content or msg.reasoning):
            self.throttle.request()
        else:
            self.throttle.render_now()

    def render(self) -> None:
        msg = self.message
        if msg is None:
            self.body.set_markdown(f"**Not sent:** {self.refused}")
            text, failed = "refused", True
        else:
            self.thinking.show_thinking(msg.reasoning, live=thinking_live(msg),
                                        seconds=msg.thinking_s, tokens=msg.reasoning_tokens)
            if not msg.content and msg.finish_reason == "error":  # say so where one reads
                self.body.set_markdown(f"**No answer:** {msg.error or 'unknown error'}")
            elif msg.content or not msg.streaming:
                self.body.set_markdown(msg.content)
            else:  # where the request stands until its first token
                self.body.set_markdown(f"*{msg.wait_note}*" if msg.wait_note else "…")
            if msg.answered_by and msg.answered_by != self.model.full_text():
                self.model.setText(msg.answered_by)
            text, failed = stats_text(msg), msg.finish_reason in ("error", "context")
        if text != self.stats.text():
            self.stats.setText(text)
        if self.stats.property("failed") != ("true" if failed else "false"):
            self.stats.setProperty("failed", "true" if failed else "false")
            self.stats.style().unpolish(self.stats)
            self.stats.style().polish(self.stats)
        self.continue_button.setEnabled(
            msg is not None and not msg.streaming and bool(msg.content))
