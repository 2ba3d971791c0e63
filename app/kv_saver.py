"""Saves open chats' KV to disk so the next turn after a restart reuses it (Qt-free).

A chat is saved when it has been idle for `idle_s` after a reply, and every open chat when
the app quits. The engine keeps the files (engine/prefix_store.py, in the data directory's
`kv-cache/`); this only says when and which conversations.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from .bridge import EngineBridge
from .conversation import Conversation

log = logging.getLogger(__name__)

IDLE_S = 60.0


class KVSaver:
    def __init__(self, bridge: EngineBridge, idle_s: float = IDLE_S) -> None:
        self.bridge = bridge
        self.idle_s = idle_s
        self.num_saved = 0  # conversations saved (tests and the log read it)
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[int]] = set()

    def watch(self, conv: Conversation) -> None:
        """Save `conv` once it has been idle for `idle_s` after each reply."""
        conv.busy_changed.connect(lambda busy: self._on_busy(conv, busy))

    def forget(self, conv: Conversation) -> None:
        timer = self._timers.pop(conv.id, None)
        if timer is not None:
            timer.cancel()

    async def save_all(self, conversations: Iterable[Conversation],
                       timeout: float = 10.0) -> int:
        """Save every conversation now (the app is quitting); how many were saved."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        convs = [c for c in conversations if not c.is_busy and c.messages]
        try:
            saved = await asyncio.wait_for(
                asyncio.gather(*(self.save(c) for c in convs)), timeout)
        except TimeoutError:
            log.warning("saving the chats' KV took over %.0f s; the rest is skipped", timeout)
            return 0
        return sum(1 for n in saved if n)

    async def save(self, conv: Conversation) -> int:
        """Save what the engine has cached of `conv`; how many tokens that is."""
        try:
            n = await self.bridge.save_kv(conv.prompt_messages())
        except Exception as exc:  # noqa: BLE001 - a cache that isn't saved is only slower later
            log.warning("could not save the KV of %s: %s", conv.title, exc)
            return 0
        if n:
            self.num_saved += 1
        return n

    def _on_busy(self, conv: Conversation, busy: bool) -> None:
        self.forget(conv)
        if not busy and conv.messages:
            loop = asyncio.get_event_loop()
            self._timers[conv.id] = loop.call_later(self.idle_s, self._save_later, conv)

    def _save_later(self, conv: Conversation) -> None:
        self._timers.pop(conv.id, None)
        task = asyncio.ensure_future(self.save(conv))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
