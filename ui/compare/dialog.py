"""The compare view: choose 2–4 targets and the message, send it to all of them at once, and
watch their replies side by side; one of them is picked to continue the chat in the tab.

Non-modal: the tab and the rest of the window stay usable. All replies are versions of one
reply in the tab's Conversation (`Conversation.compare`), so closing the view loses nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent, QKeyEvent
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.conversation import ChatMessage, Conversation
from app.plural import counted
from app.settings import Settings

from ..refusals import refusal_sentence
from ..widgets import ElidedLabel
from .column import ReplyColumn
from .targets import TargetList, target_choices


class CompareDialog(QDialog):
    """`sent()` once the message went out to the targets."""

    sent = Signal()

    def __init__(self, conversation: Conversation, settings: Settings, text: str = "",
                 parent: QWidget | None = None, images: Sequence[Any] = ()) -> None:
        super().__init__(parent)
        self.images = tuple(images)  # the draft's images (#52): every target gets them
        self.setObjectName("compareDialog")
        self.setWindowTitle(f"Compare — {conversation.title}")
        self.conversation = conversation
        self.columns: list[ReplyColumn] = []
        self.loading: asyncio.Future[None] | None = None  # the targets' models loading first
        self.stack = QStackedWidget()
        self.stack.addWidget(self._setup_page(settings, text))
        self.stack.addWidget(self._answers_page())
        outer = QVBoxLayout(self)
        outer.addWidget(self.stack)
        # bound methods, held weakly: a view that goes with its tab needs no detaching
        conversation.message_changed.connect(self._message_changed)
        conversation.message_finished.connect(self._changed)
        conversation.busy_changed.connect(self._busy_changed)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.finished.connect(lambda _result: self.detach())  # Esc, Close, Continue

    # -- the first page: targets and message --------------------------------------------
    def _setup_page(self, settings: Settings, text: str) -> QWidget:
        page = QWidget()
        col = QVBoxLayout(page)
        intro = QLabel("Send one message to several targets at once: the local engine with "
                       "different presets, the library's other models (loaded first), or "
                       "saved connections. Local targets on the same model share the "
                       "prompt's prefill. Every answer is kept as a version of the reply.")
        intro.setWordWrap(True)
        col.addWidget(intro)
        col.addWidget(QLabel("<b>Targets</b>"))
        conv = self.conversation
        choices = target_choices(settings, conv.params, conv.preset,
                                 conv.bridge.other_models())
        first = next((i for i, t in enumerate(choices) if t.backend is None
                      and t.params == conv.params), 0)
        self.target_list = TargetList(choices, settings, first)
        col.addWidget(self.target_list)
        col.addWidget(QLabel("<b>Message</b>"))
        self.message_box = QPlainTextEdit(text)
        self.message_box.setObjectName("compareMessage")
        self.message_box.setPlaceholderText("The message every target answers")
        self.message_box.setMaximumHeight(160)
        col.addWidget(self.message_box)
        if self.images:
            self.images_line = QLabel(f"With the draft's {counted(len(self.images), 'image')}"
                                      ": every target is sent them.")
            self.images_line.setObjectName("filesLine")
            col.addWidget(self.images_line)
        self.error = QLabel()
        self.error.setObjectName("errorLabel")
        self.error.setWordWrap(True)
        self.error.hide()
        col.addWidget(self.error)
        col.addStretch(1)
        row = QHBoxLayout()
        row.addStretch(1)
        cancel = QPushButton("Cancel")
        cancel.clicked.connect(self.close)
        self.send_button = QPushButton("Send to all")
        self.send_button.setObjectName("sendButton")
        self.send_button.clicked.connect(self.send)
        row.addWidget(cancel)
        row.addWidget(self.send_button)
        col.addLayout(row)
        return page

    # -- the second page: one column per target ------------------------------------------
    def _answers_page(self) -> QWidget:
        page = QWidget()
        col = QVBoxLayout(page)
        col.setContentsMargins(0, 0, 0, 0)
        self.question = ElidedLabel()
        self.question.setObjectName("compareQuestion")
        col.addWidget(self.question)
        self.split = QSplitter(Qt.Orientation.Horizontal)
        self.split.setChildrenCollapsible(False)
        col.addWidget(self.split, 1)
        row = QHBoxLayout()
        self.hint = QLabel("Pick the answer to go on with; the others stay as versions "
                           "(‹ › in the tab).")
        self.hint.setWordWrap(True)
        row.addWidget(self.hint, 1)
        self.stop_button = QPushButton("Stop all")
        self.stop_button.setToolTip("Stop every reply still generating (Esc)")
        self.stop_button.clicked.connect(self.stop)
        close = QPushButton("Close")
        close.setToolTip("Close this view; the answers stay in the tab as versions")
        close.clicked.connect(self.close)
        row.addWidget(self.stop_button)
        row.addWidget(close)
        col.addLayout(row)
        return page

    # -- actions ------------------------------------------------------------------------
    def send(self) -> bool:
        """Ask every target; False (with the reason shown) if nothing could be sent."""
        text = self.message_box.toPlainText()
        conv = self.conversation
        if not text.strip():
            return self._refuse("Write the message to compare first.")
        if conv.is_busy:
            return self._refuse("This chat is still generating: stop it first.")
        targets = self.target_list.targets()
        if self.loading is not None:
            return self._refuse("Still loading a model: wait a moment.")
        missing = [m for m in dict.fromkeys(t.model for t in targets if t.model is not None)
                   if conv.bridge.needs_load(m)]
        if missing:  # the models load first (other tabs keep streaming), then it is sent
            self.loading = asyncio.ensure_future(self._load_then_send(missing))
            self.error.setText(f"Loading {', '.join(missing)} …")
            self.error.show()
            return True
        refused = conv.image_refusal(self.images, targets)
        if refused is not None:  # a target reads text only: nothing is sent to any
            return self._refuse(refusal_sentence(refused))
        # per target: its reply, or why it was refused
        outcomes = [o if isinstance(o, ChatMessage) else refusal_sentence(o)
                    for o in conv.compare(text, targets, self.images)]
        if not any(isinstance(o, ChatMessage) for o in outcomes):
            reasons = [o for o in outcomes if isinstance(o, str)]
            return self._refuse(" ".join(reasons) or "Nothing was sent.")
        self.question.setText(f"You: {' '.join(text.split())}")
        for target, outcome in zip(targets, outcomes, strict=True):
            column = ReplyColumn(target, outcome if isinstance(outcome, ChatMessage) else None,
                                 outcome if isinstance(outcome, str) else "")
            column.continue_requested.connect(self.continue_with)
            self.split.addWidget(column)
            self.columns.append(column)
        self.split.setSizes([1000] * len(self.columns))  # equal widths
        self.stack.setCurrentIndex(1)
        self._update_stop()
        self.sent.emit()
        return True

    async def _load_then_send(self, models: list[str]) -> None:
        try:
            for model in models:
                try:
                    await self.conversation.bridge.load_model(model)
                except Exception as exc:  # noqa: BLE001 - UnknownModel, NoRoom, a bad file
                    self._refuse(f"Could not load {model}: {exc}")
                    return
        finally:
            self.loading = None
        self.error.hide()
        self.send()

    def stop(self) -> None:
        if self.loading is not None:
            self.loading.cancel()
        self.conversation.stop()

    def continue_with(self, msg: ChatMessage) -> None:
        """Show `msg` in the tab (the other answers stay as its versions) and close."""
        if msg.id in self.conversation.tree.nodes:
            self.conversation.show(msg.id)
        self.close()

    def column_for(self, msg: ChatMessage) -> ReplyColumn | None:
        return next((c for c in self.columns if c.message is msg), None)

    def _refuse(self, reason: str) -> bool:
        self.error.setText(reason)
        self.error.show()
        return False

    def _message_changed(self, msg: ChatMessage, what: str) -> None:
        if what != "tools":  # its text or its wait note
            self._changed(msg)

    def _busy_changed(self, _busy: bool) -> None:
        self._update_stop()

    def _changed(self, msg: ChatMessage) -> None:
        column = self.column_for(msg)
        if column is not None:
            column.refresh()

    def _update_stop(self) -> None:
        self.stop_button.setEnabled(any(c.message is not None and c.message.streaming
                                        for c in self.columns))

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        if event.key() == Qt.Key.Key_Escape and self.stop_button.isEnabled() \
                and self.stack.currentIndex() == 1:
            self.stop()  # Esc stops, as in the tab; a second Esc closes
            return
        super().keyPressEvent(event)

    def detach(self) -> None:
        """Stop following the conversation: the view is closing, and the replies it shows
        go on in the tab (twice is fine)."""
        if self.loading is not None:  # nothing was sent yet: nothing is (the load goes on)
            self.loading.cancel()
        conv = self.conversation
        conv.message_changed.disconnect(self._message_changed)
        conv.message_finished.disconnect(self._changed)
        conv.busy_changed.disconnect(self._busy_changed)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        self.detach()
        super().closeEvent(event)
