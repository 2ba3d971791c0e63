"""The n choices of one API request: their engine streams, events merged in arrival order.

Each choice is one engine request; they share the prompt (the first one leads, the others
reuse its prefilled prompt: Engine.submit's share_prompt_with). Events are taken by
listening (no task per stream) and queued here with their choice's index, so a handler reads
one sequence of (index, event) until every choice has ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.public import EventStream, TokenEvent


class Choices:
    def __init__(self, streams: Sequence[EventStream],
                 on_end: Callable[[EventStream], None]) -> None:
        """`on_end(stream)` is called as each choice's final event arrives, also after the
        handler stopped reading (a client that left: the engine still ends it)."""
        self.streams = list(streams)
        self._on_end = on_end
        self._queue: asyncio.Queue[tuple[int, TokenEvent]] = asyncio.Queue()
        for i, stream in enumerate(self.streams):
            stream.listen(partial(self._take, i))

    def __len__(self) -> int:
        return len(self.streams)

    def _take(self, index: int, event: TokenEvent) -> None:
        self._queue.put_nowait((index, event))
        if event.finish_reason is not None:
            self._on_end(self.streams[index])

    async def events(self) -> AsyncIterator[tuple[int, TokenEvent]]:
        """(choice index, event) in arrival order, until every choice has ended."""
        left = len(self.streams)
        while left:
            index, event = await self._queue.get()
            if event.finish_reason is not None:
                left -= 1
            yield index, event

    def cancel(self) -> None:
        """End every choice still running (no-op for those that ended)."""
        for stream in self.streams:
            stream.cancel()
