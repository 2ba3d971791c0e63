"""The input box's token count: how big the prompt the next Send makes is (system prompt,
the chat shown and the draft), against the model's context: "123 / 8192 tokens".

Counted by the tokenizer of the tab's model against its context (the default model, or the
library model the tab picked: issue #50) on a worker thread (app.bridge.prompt_size), at
most once per THROTTLE_MS while the draft or the chat changes, so a keystroke never waits
for it. Over the context it turns into a warning, and `refusal()` is what Send says
instead of sending. Hidden for a tab on a remote backend (its server has its own
tokenizer) and while the tab's model is not loaded (counted again once it is)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QLabel, QWidget

from app.bridge import PromptSize
from app.context import AppContext
from app.conversation import Conversation
from app.request import Refusal, RefusalCode

THROTTLE_MS = 250
TIP = ("The prompt the next Send makes, in the model's tokens: the system prompt, the "
       "messages shown and this draft with its files and images. The model's context holds "
       "{context} tokens; the reply needs room in it too.")

# (the draft's text, the index of the message it edits or None)
Draft = Callable[[], tuple[str, int | None]]


class TokenCount(QLabel):
    """`size`: the last count (None: none shown); `current`: it counts the chat and
    draft as they are now; `counts`: how many counts were made. `shown()` after a count
    is shown."""

    shown = Signal()

    def __init__(self, ctx: AppContext, conversation: Conversation, draft: Draft,
                 parent: QWidget | None = None,
                 files: Callable[[], list[Any]] = list,
                 images: Callable[[], list[Any]] = list) -> None:
        super().__init__(parent)
        self.setObjectName("tokenCount")
        self.setProperty("over", "false")
        self.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.ctx = ctx
        self.conversation = conversation
        self.draft = draft
        self.files = files  # the draft's attached files: counted framed as a send puts them
        # the draft's images (#52): a vision model counts their tokens, a text-only one none
        self.images = images
        self.size: PromptSize | None = None
        self.current = False
        self.counts = 0
        self._task: asyncio.Future[None] | None = None
        self._changes = 0  # schedule() calls: a count is current if none came after it
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(THROTTLE_MS)
        self._timer.timeout.connect(self._count)
        ctx.bridge.state_changed.connect(self._on_state)
        # a model beside the default one loaded or went: the tab's may be that one
        self._fleet = ctx.bridge.fleet
        if self._fleet is not None:
            self._fleet.changed.connect(self._on_model_changed)
        self.hide()
        self.schedule()

    def schedule(self) -> None:
        """The draft or the chat changed: count again within THROTTLE_MS (a count already
        due is not pushed back, so steady typing still updates it)."""
        self.current = False
        self._changes += 1
        if not self._timer.isActive():
            self._timer.start()

    def refusal(self) -> Refusal | None:
        """Why Send must not send the draft (the count is current and over the context);
        ui/refusals.py words it."""
        size = self.size
        if not self.current or size is None or not size.over or self._drops():
            return None
        return Refusal(RefusalCode.CONTEXT_LENGTH_EXCEEDED,
                       f"the prompt is {size.tokens} tokens; the model's context holds "
                       f"{size.context}, the reply included", param="messages",
                       detail={"tokens": size.tokens, "context": size.context})

    def _drops(self) -> bool:
        """The tab's context overflow policy leaves older messages out of a prompt that
        does not fit (app/request/overflow.py), so Send goes on past the context."""
        return bool(self.conversation.params.get("context_overflow"))

    def detach(self) -> None:
        """The tab is closing."""
        self.ctx.bridge.state_changed.disconnect(self._on_state)
        if self._fleet is not None:
            self._fleet.changed.disconnect(self._on_model_changed)
        self.stop()

    def stop(self) -> None:
        """No more counts: the one running is cancelled (the tab or the app is closing)."""
        self._timer.stop()
        if self._task is not None:
            self._task.cancel()

    def _on_state(self, *_args: object) -> None:
        if not shiboken6.isValid(self):  # the window went without closing its tabs (quit)
            self.ctx.bridge.state_changed.disconnect(self._on_state)
            return
        self.schedule()  # a model loaded (another tokenizer, another context) or went

    def _on_model_changed(self, _name: str, _state: object) -> None:
        if not shiboken6.isValid(self):  # the window went without closing its tabs (quit)
            return  # held weakly: gone with this label
        if self.conversation.model is not None:
            self.schedule()

    def _count(self) -> None:
        if self._task is not None and not self._task.done():
            return  # its end sees the change and counts again
        if self.conversation.backend is not None:  # a remote server counts its own tokens
            self.current = True
            self._show(None)
            return
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:  # no loop (the app is gone, or a test's loop was closed)
            return
        if loop.is_closed():
            return
        text, editing = self.draft()
        messages = self.conversation.next_prompt(text, editing, self.files(), self.images())
        self.counts += 1
        self._task = loop.create_task(self._run(messages, self._changes))

    async def _run(self, messages: list[dict[str, object]], changes: int) -> None:
        size = await self.ctx.bridge.count_prompt(messages, self.conversation.model)
        if not shiboken6.isValid(self):  # the tab went meanwhile
            return
        if changes == self._changes:
            self.current = True
        elif not self._timer.isActive():  # changed while counting, and no count is due
            self._timer.start()
        self._show(size)

    def _show(self, size: PromptSize | None) -> None:
        self.size = size
        if size is None:
            self.hide()
            self.shown.emit()
            return
        over = size.over
        self.setText(f"{size.tokens} / {size.context} tokens"
                     + ("" if not over else ": older messages will be left out"
                        if self._drops() else ": too long for the model's context"))
        self.setToolTip(TIP.format(context=size.context))
        if self.property("over") != ("true" if over else "false"):
            self.setProperty("over", "true" if over else "false")
            self.style().unpolish(self)
            self.style().polish(self)
        self.show()
        self.shown.emit()
