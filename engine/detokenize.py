"""Incremental text for one sequence: token deltas, with stop strings that never leak.

A reply is decoded after its prompt's last tokens (`after`), as vLLM's detokenizer reads a
prefix: SentencePiece and byte-level detokenizers drop the leading space of the first token
they see (the start of a text has none), so a reply decoded alone lost its first space ("The
capital of France is" + "Paris." where the model wrote " Paris."). After the prompt the
text is what the model produced: prompt + reply gives back the whole text, as code-completion
and fill-in-the-middle clients need, in completions and chat alike (docs/server.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CONTEXT_TOKENS = 4  # the prompt's last tokens a reply is decoded after (vLLM reads 5)


def after(tokenizer: Any, context: Sequence[int]) -> tuple[Any, int]:
    """A fresh streaming detokenizer (mlx-lm's, from `tokenizer`) that has read the last
    CONTEXT_TOKENS of `context` and given out their text, and how many characters of the
    context it still holds back (a trailing space, a split character: they come out with the
    reply's first segment and are the prompt's, not the reply's). That count is what a
    second one, reading the same tokens and flushed, gives beyond the first's segments."""
    detok = tokenizer.detokenizer
    context = list(context)[-CONTEXT_TOKENS:]
    if not context:
        return detok, 0
    probe = tokenizer.detokenizer
    given = 0
    for token in context:
        detok.add_token(token)
        given += len(detok.last_segment)  # read, so the reply's segments start after it
        probe.add_token(token)
    probe.finalize()
    return detok, max(0, len(probe.text) - given)


class TextStream:
    """Turns a sequence's tokens into text deltas.

    Text that could still turn into a stop string is held back until it cannot, so a
    caller never sees any part of a stop string, even across token boundaries.
    """

    __slots__ = ("_detok", "_stops", "_skip", "_pending", "_emitted", "stopped")

    def __init__(self, detokenizer: Any, stop: tuple[str, ...] = (), skip: int = 0) -> None:
        """`skip`: characters at the start of the detokenizer's next segments that are not
        the reply's (the context `after` gave it held them back)."""
        self._detok = detokenizer  # mlx-lm StreamingDetokenizer, a fresh copy per sequence
        self._stops = stop
        self._skip = skip
        self._pending = ""  # decoded, not yet emitted
        self._emitted: list[str] = []
        self.stopped = False  # a stop string was found; later tokens are ignored

    @property
    def text(self) -> str:
        return "".join(self._emitted)

    def add(self, token: int) -> str:
        """Add one token; return the text that is now safe to show."""
        if self.stopped:
            return ""
        self._detok.add_token(token)
        self._pending += self._fresh()
        return self._release(final=False)

    def finish(self) -> str:
        """The sequence ended: flush what the detokenizer and the stop check held back."""
        if not self.stopped:
            self._detok.finalize()
            self._pending += self._fresh()
        return self._release(final=True)

    def _fresh(self) -> str:
        """The detokenizer's new segment, less what is left of the context's held text.
        (Its segments, not slices of its text: a text's replacement characters for invalid
        bytes may be fewer or more once more bytes arrive.)"""
        segment = self._detok.last_segment
        if self._skip and segment:
            cut = min(self._skip, len(segment))
            segment, self._skip = segment[cut:], self._skip - cut
        return segment

    def _release(self, final: bool) -> str:
        pending = self._pending
        if not pending:
            return ""
        if self._stops:
            cut = min((i for i in (pending.find(s) for s in self._stops) if i >= 0), default=-1)
            if cut >= 0:
                self.stopped = True
                self._pending = ""
                return self._emit(pending[:cut])
        keep = 0 if final else self._held_suffix(pending)
        self._pending = pending[len(pending) - keep :] if keep else ""
        return self._emit(pending[: len(pending) - keep])

    def _held_suffix(self, text: str) -> int:
        """Length of the longest suffix of `text` that starts some stop string."""
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(text)), best, -1):
                if stop.startswith(text[-n:]):
                    best = n
                    break
        return best

    def _emit(self, delta: str) -> str:
        if delta:
            self._emitted.append(delta)
        return delta
