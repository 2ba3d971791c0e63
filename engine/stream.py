"""What `Engine.submit` returns: an async iterator of one request's events."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable

from .stats import RequestStats
from .token_event import TokenEvent


class EventStream:
    """Events of one request, in order, for `async for`; leaving the loop early (or
    `aclose()`) calls `cancel()`. Subclasses say where events come from and how a request
    is cancelled: the engine's `RequestStream` here, a remote server's in app/remote.

    Events are queued on the event loop's thread, so no locking is needed here.
    """

    def __init__(self, request_id: str, prompt_tokens: list[int]) -> None:
        self.request_id = request_id
        self.prompt_tokens = prompt_tokens
        self.tokens: list[int] = []
        self.finish_reason: str | None = None
        self.error: str | None = None
        self.stats: RequestStats | None = None  # set with the final event
        self._parts: list[str] = []
        self._pending: deque[TokenEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._listener: Callable[[TokenEvent], None] | None = None

    @property
    def text(self) -> str:
        """The request's text so far. Joined once per new text and kept as the one part,
        so every reader between two events gets the same string (the app reads it at each
        frame: app/bridge/generation.py), not a join each."""
        if len(self._parts) > 1:
            self._parts[:] = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def cancel(self) -> None:
        raise NotImplementedError

    def listen(self, fn: Callable[[TokenEvent], None]) -> None:
        """Take the events by a call each, on the event loop's thread, instead of `async
        for`: no task wakes per event (a UI with many streams coalesces them anyway; a
        task per stream costs one loop callback per stream per engine tick). Events already
        queued are handed over at once. Iterate or listen, not both."""
        self._listener = fn
        while self._pending:
            fn(self._pending.popleft())

    def _queue(self, event: TokenEvent) -> None:
        """Hand `event` to the listener, or to the iterator (waking it if it waits)."""
        if self._listener is not None:
            self._listener(event)
            return
        self._pending.append(event)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def aclose(self) -> None:
        self.cancel()

    def __aiter__(self) -> AsyncIterator[TokenEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[TokenEvent]:
        try:
            while True:
                while self._pending:
                    event = self._pending.popleft()
                    yield event
                    if event.finish_reason is not None:
                        return
                self._waiter = asyncio.get_running_loop().create_future()
                await self._waiter
                self._waiter = None
        finally:
            self.cancel()  # no-op once finished

    async def result(self) -> str:
        """Wait for the end; return the whole text (partial on error or cancel)."""
        async for _ in self:
            pass
        return self.text


class RequestStream(EventStream):
    """What `Engine.submit` returns. Events are pushed on the event loop's thread (or the
    caller's, in `Engine.step` mode)."""

    def __init__(self, request_id: str, prompt_tokens: list[int],
                 cancel: Callable[[str], None]) -> None:
        super().__init__(request_id, prompt_tokens)
        self._cancel = cancel

    def _push(self, event: TokenEvent) -> None:
        if self.finished:
            return
        if event.token is not None:
            self.tokens.append(event.token)
        if event.text:
            self._parts.append(event.text)
        if event.finish_reason is not None:
            self.finish_reason = event.finish_reason
            self.error = event.error
            self.stats = event.stats
        self._queue(event)

    def cancel(self) -> None:
        """Ask the engine to drop this request on its next tick."""
        if not self.finished:
            self._cancel(self.request_id)
