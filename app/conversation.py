"""One chat (one tab): its messages, system prompt and sampling settings. Qt-free.

Views subscribe to the events; every change to the message list goes through here.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

from engine.public import lone_surrogate, repair_text

from .bridge import EngineBridge, Generation, ReplyStats, SubmitError
from .events import Event
from .titles import title_from_message
from .waiting import wait_note

_ids = itertools.count(1)


@dataclass
class ChatMessage:
    role: str  # "user" | "assistant"
    content: str
    streaming: bool = False
    stats: ReplyStats | None = None
    finish_reason: str | None = None
    error: str | None = None
    request_id: str | None = None
    params: dict[str, Any] | None = None  # the sampling settings a reply was made with
    # A reply's generated token ids: handed back with the next prompt so the engine reuses
    # its cached KV exactly (engine/chat_prompt.py); None for user text and old replies.
    token_ids: list[int] | None = None
    wait_note: str = ""  # before the first token: "queued — 2 ahead", "reading prompt 40 %"
    # Who answered: the backend (None: the local engine, else a connection's name) and its
    # description ("SmolLM2 …" or "lab (qwen)"), saved with the reply's stats
    backend: str | None = None
    answered_by: str = ""
    id: str = field(default_factory=lambda: str(uuid.uuid4()))  # its history row


FINISH_NOTES = {
    "length": "stopped at max tokens",
    "context": "the context is full: start a new chat or shorten this one",
    "cancelled": "stopped",
    "shutdown": "the engine shut down",
    "interrupted": "incomplete: BatchChat closed before this reply finished",
}


class Conversation:
    """Events: `reset()` (message list replaced or truncated), `added(index)`,
    `delta(index, text)`, `reply_finished(index)` (the reply has its stats and finish
    reason), `busy_changed(bool)`, `notice(text)`, `meta_changed()` (title, system prompt,
    settings or preset)."""

    def __init__(self, bridge: EngineBridge, *, title: str = "", system_prompt: str = "",
                 params: dict[str, Any] | None = None, session_id: str | None = None,
                 messages: list[ChatMessage] | None = None, preset: str | None = None,
                 backend: str | None = None) -> None:
        self.id = next(_ids)
        self.session_id = session_id or str(uuid.uuid4())  # its row in the history store
        self.bridge = bridge
        self.title = title or self.default_title
        self.system_prompt = system_prompt
        self.params: dict[str, Any] = dict(params or {})
        self.preset = preset
        self.backend = backend  # None: the local engine; else a saved connection's name
        self.messages: list[ChatMessage] = list(messages or [])
        self.generation: Generation | None = None
        self.generations: list[Generation] = []  # the newest reply and any still running
        self.reset, self.added, self.delta = Event(), Event(), Event()
        self.reply_finished, self.busy_changed, self.notice = Event(), Event(), Event()
        self.meta_changed = Event()
        self.waiting = Event()  # (index): a reply's wait_note changed

    @property
    def default_title(self) -> str:
        """The title a chat has until it is named (by its first message or the user)."""
        return f"Chat {self.id}"

    @property
    def tag(self) -> str:
        return f"tab-{self.id}"

    @property
    def is_busy(self) -> bool:
        return self.generation is not None

    @property
    def can_regenerate(self) -> bool:
        return not self.is_busy and any(m.role == "user" for m in self.messages)

    # -- actions ------------------------------------------------------------------------
    def send(self, text: str) -> bool:
        """Add a user message and start the reply. False (with a notice) if refused."""
        if self.is_busy or not text.strip() or not self._valid_text(text):
            return False
        if not self.messages and self.title == self.default_title:
            # named after its first message until the user renames it
            self.rename(title_from_message(text) or self.title)
        self.messages.append(ChatMessage("user", text))
        self.added.emit(len(self.messages) - 1)
        return self._start()

    def regenerate(self) -> bool:
        """Drop the last reply (if any) and generate it again."""
        if not self.can_regenerate:
            return False
        if self.messages[-1].role == "assistant":
            self._truncate(len(self.messages) - 1)
        return self._start()

    def edit_and_resend(self, index: int, text: str) -> bool:
        """Replace user message `index`, drop everything after it, and reply again."""
        if self.is_busy or not text.strip() or self.messages[index].role != "user" \
                or not self._valid_text(text):
            return False
        self._truncate(index)
        self.messages.append(ChatMessage("user", text))
        self.added.emit(index)
        return self._start()

    # Titles and settings are never refused: text that is not valid Unicode (it could never
    # be saved) is repaired instead, each bad character becoming U+FFFD.
    def rename(self, title: str) -> None:
        self.title = repair_text(title)
        self.meta_changed.emit()

    def update_settings(self, system_prompt: str, params: dict[str, Any] | None = None,
                        preset: str | None = None) -> None:
        """New system prompt, and sampling settings when given (None: keep them)."""
        self.system_prompt = repair_text(system_prompt)
        if params is not None:
            self.params = params
        self.preset = preset
        self.meta_changed.emit()

    def set_backend(self, backend: str | None) -> None:
        """Where the next reply comes from (a running reply finishes where it started)."""
        if backend != self.backend:
            self.backend = backend
            self.meta_changed.emit()

    def stop(self) -> None:
        if self.generation is not None:
            self.generation.cancel()

    def close(self) -> None:
        """The tab is closing: cancel the reply and stop listening to it."""
        gen, self.generation = self.generation, None
        if gen is not None:
            gen.detach()
            gen.cancel()

    def prompt_messages(self) -> list[dict[str, Any]]:
        """The chat as the engine takes it: replies carry their token ids."""
        out: list[dict[str, Any]] = [{"role": "system", "content": self.system_prompt}] \
            if self.system_prompt.strip() else []
        for m in self.messages:
            if m.content or m.role == "user":
                out.append({"role": m.role, "content": m.content}
                           | ({"token_ids": m.token_ids} if m.token_ids else {}))
        return out

    # -- internals ----------------------------------------------------------------------
    def _valid_text(self, text: str) -> bool:
        """False, with a notice naming the character, for text the model and the history
        cannot take (a lone surrogate); the user fixes it, nothing is sent or saved."""
        bad = lone_surrogate(text)
        if bad is not None:
            self.notice.emit(f"Not sent: the message {bad}. Remove or retype that character.")
        return bad is None

    def _truncate(self, n: int) -> None:
        del self.messages[n:]
        self.reset.emit()

    def _start(self) -> bool:
        try:
            gen = self.bridge.submit(self.prompt_messages(), self.params, tag=self.tag,
                                     backend=self.backend)
        except SubmitError as exc:
            self.notice.emit(_submit_note(exc))
            return False
        self.generation = gen
        # Only replies still running, and the newest, keep their Generation (the history
        # finds a reply's stats by it until it has ended): each holds its prompt's ids (the
        # whole chat so far), its text and its tokens, which the messages keep anyway; kept
        # for every turn, a chat's memory grew with the square of its turns.
        self.generations = [g for g in self.generations if not g.is_finished]
        self.generations.append(gen)
        self.messages.append(ChatMessage("assistant", "", streaming=True,
                                         request_id=gen.request_id, params=dict(self.params),
                                         backend=gen.backend, answered_by=gen.answered_by))
        index = len(self.messages) - 1
        gen.delta.connect(lambda text: self._on_delta(index, text))
        gen.finished.connect(lambda g: self._on_finished(index, g))
        gen.waiting.connect(lambda progress: self._on_waiting(index, progress))
        self.added.emit(index)
        self.busy_changed.emit(True)
        return True

    def _on_waiting(self, index: int, progress: Any) -> None:
        note = wait_note(progress)
        if note != self.messages[index].wait_note:
            self.messages[index].wait_note = note
            self.waiting.emit(index)

    def _on_delta(self, index: int, text: str) -> None:
        self.messages[index].wait_note = ""
        self.messages[index].content += text
        self.delta.emit(index, text)

    def _on_finished(self, index: int, gen: Generation) -> None:
        msg = self.messages[index]
        msg.streaming = False
        msg.wait_note = ""
        msg.stats = gen.stats
        msg.finish_reason = gen.finish_reason
        msg.error = gen.error
        msg.token_ids = gen.tokens or None
        self.generation = None
        self.reply_finished.emit(index)
        self.busy_changed.emit(False)
        if gen.finish_reason == "error" and gen.backend is not None:
            kept = " The partial reply is kept above." if msg.content else ""
            self.notice.emit(f"Server error: {gen.error or 'unknown'}.{kept}")
        elif gen.finish_reason == "error":
            self.notice.emit(f"Engine error: {gen.error or 'unknown'}")
        elif gen.finish_reason == "context":
            self.notice.emit("Context full: the reply was cut. Start a new chat or edit an "
                             "earlier message.")


def _submit_note(exc: SubmitError) -> str:
    if exc.kind == "queue_full":
        return f"The engine's queue is full; try again in a moment. ({exc})"
    if exc.kind == "not_ready":
        return str(exc)
    return f"Request refused: {exc}"
