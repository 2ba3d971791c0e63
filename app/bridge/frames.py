"""Per-frame coalescing: every reply's token deltas reach views at most once per frame.

However many requests stream, listeners run once per `frame_s` (a `loop.call_later`), not
once per token: on the app's qasync loop each callback is a Qt event on the UI thread.
Events: `frame()` after each flush.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from ..events import Event
from .generation import Generation

log = logging.getLogger(__name__)


class FramePump:
    """Follows every reply until its end has been flushed (`active`)."""

    def __init__(self, loop: Callable[[], asyncio.AbstractEventLoop],
                 frame_s: float = 0.016) -> None:
        self.frame_s = frame_s
        self.frame = Event()
        self.num_flushes = 0
        self._loop = loop
        self._active: dict[str, Generation] = {}
        self._dirty: dict[str, Generation] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._ends_wanted: asyncio.Future[None] | None = None  # see local_ends

    @property
    def active(self) -> list[Generation]:
        return list(self._active.values())

    def follow(self, gen: Generation) -> None:
        """Pump its events into per-frame deltas (local and remote streams alike)."""
        self._active[gen.request_id] = gen
        # A call per event batch the engine delivers, not a task woken per stream per tick
        # (16 streams were 16 loop callbacks per tick, each a Qt timer event on the UI thread)
        gen.stream.listen(lambda event, gen=gen: self._on_event(gen, event))

    async def local_ends(self, timeout: float) -> None:
        """Wait until every local reply has its final event (finish reason "shutdown"): the
        stopped engine's last events come by loop callbacks. Remote replies go on streaming
        across a model switch, so they are not waited for."""
        waiting = [g for g in self._active.values() if g.backend is None and not g.ended]
        if not waiting:
            return
        self._ends_wanted = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(self._ends_wanted, timeout)
        except TimeoutError:
            log.warning("%d replies got no final event from the stopped engine",
                        sum(not g.ended for g in waiting))
        finally:
            self._ends_wanted = None

    def flush(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        dirty, self._dirty = self._dirty, {}
        if not dirty:
            return
        self.num_flushes += 1
        for gen in dirty.values():
            gen.flush()
            if gen.is_finished:
                self._active.pop(gen.request_id, None)
        self.frame.emit()

    def _on_event(self, gen: Generation, event: Any) -> None:
        # the event's text is already in gen.stream.text (the stream keeps it before it
        # hands the event on): the flush reads it there
        if event.finish_reason is not None:
            gen.ended = True
            wanted = self._ends_wanted
            if wanted is not None and not wanted.done() and all(
                    g.ended for g in self._active.values() if g.backend is None):
                wanted.set_result(None)
        self._mark(gen)

    def _mark(self, gen: Generation) -> None:
        self._dirty[gen.request_id] = gen
        if self._handle is None:
            self._handle = self._loop().call_later(self.frame_s, self.flush)
