"""Incremental text for one sequence: token deltas, with stop strings that never leak."""

from __future__ import annotations

from typing import Any


class TextStream:
    """Turns a sequence's tokens into text deltas.

    Text that could still turn into a stop string is held back until it cannot, so a
    caller never sees any part of a stop string, even across token boundaries.
    """

    __slots__ = ("_detok", "_stops", "_pending", "_emitted", "stopped")

    def __init__(self, detokenizer: Any, stop: tuple[str, ...] = ()) -> None:
        self._detok = detokenizer  # mlx-lm StreamingDetokenizer, a fresh copy per sequence
        self._stops = stop
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
        self._pending += self._detok.last_segment
        return self._release(final=False)

    def finish(self) -> str:
        """The sequence ended: flush what the detokenizer and the stop check held back."""
        if not self.stopped:
            self._detok.finalize()
            self._pending += self._detok.last_segment
        return self._release(final=True)

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
