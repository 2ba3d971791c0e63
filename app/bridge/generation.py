"""One reply being generated, as a view sees it: per-frame deltas, then its end and stats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.public import EventStream

from ..events import Event
from ..plural import counted


@dataclass(frozen=True, slots=True)
class ReplyStats:
    """What a view shows under a reply (a plain copy of the engine's RequestStats)."""

    generated_tokens: int
    prompt_tokens: int
    ttft_s: float | None
    tokens_per_s: float
    e2e_s: float
    finish_reason: str
    error: str | None = None
    cached_tokens: int = 0  # prompt tokens the engine reused from its prefix cache
    # speculative decoding: draft tokens checked, of those accepted, and the decode steps
    # the reply took (engine RequestStats; all 0 when it drafted nothing)
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    decode_steps: int = 0
    # what the tab's context overflow policy left out of the prompt (app/request/overflow.py)
    dropped_tokens: int = 0
    dropped_messages: int = 0

    @property
    def drafts(self) -> str:
        """"drafts 74% accepted · 2.3 tokens per step" ("" when the reply drafted nothing)."""
        if not 0 <= self.accepted_tokens <= self.drafted_tokens or not self.drafted_tokens:
            return ""  # nothing drafted (or numbers from a hand-edited import)
        text = f"drafts {100 * self.accepted_tokens / self.drafted_tokens:.0f}% accepted"
        if self.decode_steps > 0 and self.generated_tokens > 1:
            # the first token came from the prompt's pass, not a decode step
            text += f" · {(self.generated_tokens - 1) / self.decode_steps:.1f} tokens per step"
        return text

    def summary(self) -> str:
        parts = [counted(self.generated_tokens, "token")]
        if self.ttft_s is not None:
            parts.append(f"first token {self.ttft_s:.2f} s")
        if self.cached_tokens:
            parts.append(f"{self.cached_tokens} of {counted(self.prompt_tokens, 'prompt token')} "
                         "cached")
        parts.append(f"{self.tokens_per_s:.1f} tok/s")
        if self.drafts:
            parts.append(self.drafts)
        if self.dropped_tokens > 0:
            parts.append(f"{counted(self.dropped_tokens, 'token')} dropped "
                         f"({counted(self.dropped_messages, 'message')})")
        parts.append(self.finish_reason)
        return " · ".join(parts)


class Generation:
    """One reply being generated, as a view follows it. `delta(text)` fires at most once
    per frame with the text that arrived since the last one; `finished(generation)` fires
    once, after the last delta (app.bridge.frames decides when a frame is flushed).

    It keeps no text of its own: while the reply streams its text is held once, by its
    stream (`stream.text`: the engine's RequestStream or a RemoteStream), and a Generation
    only counts how much of it views have had (`shown_chars`); each frame's delta is the
    stream's text past that count. The conversation's ChatMessage takes the stream's text
    at each frame and keeps it once the reply ended (docs/architecture.md, "A reply's
    text")."""

    def __init__(self, stream: EventStream, tag: str | None,
                 backend: str | None = None, answered_by: str = "") -> None:
        self.stream = stream
        self.tag = tag
        self.backend = backend  # None: the local engine, else a connection's name
        # a local reply on a library model beside the default one (None: the default)
        self.model: str | None = None
        self.answered_by = answered_by  # "model" or "connection (model)", for the history
        self.delta = Event()
        self.finished = Event()
        self.waiting = Event()  # (RequestProgress | None) while it has no token yet
        # (generation) once it has ended, as `finished`, but kept by detach(): for what
        # outlives the view (the history records a reply cancelled by closing its tab)
        self.done = Event()
        self.progress: Any = None  # the engine's RequestProgress, until the first token
        # how much of the stream's text `delta` listeners have had (a count, not a copy)
        self.shown_chars = 0
        self.shown_reasoning = 0  # as much, of a remote reply's thinking (RemoteStream)
        self.ended = False  # the stream ended (its finish may not be flushed yet)
        self.is_finished = False  # `finished` was emitted
        # time.monotonic() of the first frame a reasoning model's reply was split at (the
        # start of its "Thought for N s": app/reasoning/reply.py)
        self.first_frame_at: float | None = None
        # with tools (routing): how the reply's calls are written (app.tools' CallFormat,
        # local replies) and the functions offered
        self.call_format: Any = None
        self.tool_names: list[str] = []
        # a reasoning model's reply: how its text splits into thinking and answer
        # (app/request/reasoning.py's Shape; None: all answer, and remote replies)
        self.shape: Any = None
        self.reply_split: Any = None  # its splitter, fed as frames come (reasoning/reply.py)
        # the attached files' passages its prompt was given (app/attachments/fit.py)
        self.citations: tuple[Any, ...] = ()
        # what the context overflow policy left out of its prompt (app/request/overflow.py)
        self.dropped: Any = None
        # why the app ended it, when that says more than the engine's "cancelled" or
        # "shutdown": "switched" (a model switch stopped it, app/bridge/switch.py)
        self.ended_by: str | None = None

    @property
    def request_id(self) -> str:
        return self.stream.request_id

    @property
    def text(self) -> str:
        """The reply's text so far: its stream's (the one copy while it streams)."""
        return self.stream.text

    @property
    def finish_reason(self) -> str | None:
        return self._reason(self.stream.finish_reason)

    def _reason(self, reason: str | None) -> str | None:
        if self.ended_by is not None and reason in ("cancelled", "shutdown"):
            return self.ended_by  # ended as the app asked, not as it finished by itself
        return reason

    @property
    def error(self) -> str | None:
        return self.stream.error

    @property
    def stats(self) -> ReplyStats | None:
        s = self.stream.stats
        if s is None:
            return None
        return ReplyStats(s.generated_tokens, s.prompt_tokens, s.ttft_s, s.tokens_per_s,
                          s.e2e_s, self._reason(s.finish_reason) or s.finish_reason, s.error,
                          s.cached_tokens, s.drafted_tokens, s.accepted_tokens,
                          s.decode_steps, *((self.dropped.tokens, self.dropped.messages)
                                            if self.dropped else ()))

    @property
    def tokens(self) -> list[int]:
        """The generated token ids so far."""
        return list(self.stream.tokens)

    @property
    def has_text(self) -> bool:
        """Some text arrived (shown, or waiting for the next frame)."""
        return bool(self.stream.text)

    def cancel(self) -> None:
        self.stream.cancel()

    def detach(self) -> None:
        """Forget every listener (the view is going away)."""
        self.delta.disconnect()
        self.finished.disconnect()
        self.waiting.disconnect()

    def flush(self) -> None:
        """Hand `delta` listeners the stream's text that came since the last flush, then
        `finished` once the stream has ended."""
        text = self.stream.text
        thought = len(getattr(self.stream, "reasoning", ""))  # a remote reply's thinking
        if len(text) > self.shown_chars:
            new = text[self.shown_chars:]
            self.shown_chars = len(text)
            self.shown_reasoning = thought
            self.delta.emit(new)
        elif thought > self.shown_reasoning:  # only thinking arrived: views read it there
            self.shown_reasoning = thought
            self.delta.emit("")
        if self.ended and not self.is_finished:
            self.is_finished = True
            self.finished.emit(self)
            self.done.emit(self)
