"""The history's delayed writes: a session's metadata after a short pause, a streaming
reply's checkpoint at most every few seconds. One asyncio timer for all of them, armed for
the earliest; a newer write under the same key replaces the older. Qt-free."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

Key = tuple[str, str]  # ("meta", session id) or ("checkpoint", message id)


class DueWrites:
    """Writes due at a time, run on the current asyncio loop (qasync's in the app)."""

    def __init__(self) -> None:
        self._due: dict[Key, tuple[float, Callable[[], object]]] = {}
        self._handle: asyncio.TimerHandle | None = None

    def __contains__(self, key: Key) -> bool:
        return key in self._due

    def later(self, key: Key, delay: float, fn: Callable[[], object]) -> None:
        """Run `fn` in `delay` seconds (at once if negative), instead of any under `key`."""
        self._due[key] = (time.monotonic() + max(0.0, delay), fn)
        self._arm()

    def drop(self, key: Key) -> None:
        self._due.pop(key, None)

    def drop_chat(self, session_id: str, message_ids: set[str]) -> None:
        """Forget a chat's delayed writes: its metadata, and these messages' checkpoints."""
        for key in list(self._due):
            if key == ("meta", session_id) or (key[0] == "checkpoint" and key[1] in message_ids):
                del self._due[key]

    def flush(self) -> None:
        """Run every delayed write now."""
        due, self._due = self._due, {}
        for _when, fn in due.values():
            fn()
        self._cancel()

    def _arm(self) -> None:
        self._cancel()
        if self._due:
            wait = min(when for when, _fn in self._due.values()) - time.monotonic()
            self._handle = asyncio.get_event_loop().call_later(max(0.0, wait), self._run_due)

    def _run_due(self) -> None:
        self._handle = None
        now = time.monotonic()
        for key, (when, fn) in list(self._due.items()):
            if when <= now and self._due.get(key) == (when, fn):
                del self._due[key]
                fn()
        self._arm()

    def _cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
