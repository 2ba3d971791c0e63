"""Waiting feedback: tells each local reply with no text yet where it stands (queue position,
prompt read so far), from one cheap engine read-out for all of them, a few times a second."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..backend.local_target import LocalTarget
from .frames import FramePump

WAIT_POLL_S = 0.1  # how often a reply with no token yet is told where it stands


class WaitPoll:
    def __init__(self, target: Callable[[], LocalTarget | None], frames: FramePump,
                 loop: Callable[[], asyncio.AbstractEventLoop]) -> None:
        self._target = target
        self._frames = frames
        self._loop = loop
        self._handle: asyncio.TimerHandle | None = None

    def watch(self) -> None:
        """Poll until no local reply is waiting (called after each local submit)."""
        if self._handle is None:
            self._handle = self._loop().call_later(WAIT_POLL_S, self._poll)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _poll(self) -> None:
        self._handle = None
        waiting = [g for g in self._frames.active
                   if not g.has_text and not g.ended and g.backend is None]
        target = self._target()
        if not waiting or target is None:
            return
        progress = target.request_progress()
        for gen in waiting:
            now = progress.get(gen.request_id)
            if now != gen.progress:
                gen.progress = now
                gen.waiting.emit(now)
        self.watch()
