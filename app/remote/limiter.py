"""A concurrency limit that can change while requests wait (asyncio.Semaphore cannot)."""

from __future__ import annotations

import asyncio
from collections import deque


class Limiter:
    def __init__(self, limit: int) -> None:
        self.limit = _check(limit)
        self.active = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return sum(not f.done() for f in self._waiters)

    async def acquire(self) -> None:
        if self.active < self.limit and not self._waiters:
            self.active += 1
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut  # _wake counted us in before setting the result
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # granted, then cancelled before we could use it
            raise

    def release(self) -> None:
        self.active -= 1
        self._wake()

    def set_limit(self, limit: int) -> None:
        """Takes effect at once for waiters; running requests above a lower limit finish."""
        self.limit = _check(limit)
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.active < self.limit:
            fut = self._waiters.popleft()
            if not fut.done():
                self.active += 1
                fut.set_result(None)


def _check(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"the concurrency limit must be an integer >= 1, got {limit!r}")
    return limit
