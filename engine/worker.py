"""The engine loop: drains an inbox, runs ticks, hands events to the asyncio loop."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .engine_core import EngineCore
from .token_event import TokenEvent

log = logging.getLogger(__name__)

# ("add", Sequence) | ("cancel", request_id) | ("save", (token ids, Future of the count))
Command = tuple[str, Any]


class Inbox:
    """Commands from any thread to the engine thread; a Condition, so idle means asleep."""

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self._items: deque[Command] = deque()
        self.stopping = False

    def put(self, command: Command) -> None:
        with self.cv:
            self._items.append(command)
            self.cv.notify()

    def stop(self) -> None:
        with self.cv:
            self.stopping = True
            self.cv.notify()

    def drain(self) -> list[Command]:
        with self.cv:
            items = list(self._items)
            self._items.clear()
            return items

    def wait(self, busy: Callable[[], bool]) -> list[Command]:
        """Block until there is a command, work to do, or a stop; then drain."""
        with self.cv:
            while not self._items and not busy() and not self.stopping:
                self.cv.wait()
            items = list(self._items)
            self._items.clear()
            return items


def apply(core: EngineCore, commands: list[Command]) -> None:
    for kind, arg in commands:
        if kind == "add":
            core.add(arg)
        elif kind == "cancel":
            core.cancel(arg)
        elif kind == "save":
            tokens, done = arg
            try:
                done.set_result(core.save_prefix(tokens))
            except Exception as exc:  # noqa: BLE001 - the caller hears of it, serving goes on
                done.set_exception(exc)


class EngineLoop:
    """The engine thread's work, run on a compute thread (engine/compute_thread.py)."""

    def __init__(self, core: EngineCore, inbox: Inbox,
                 deliver: Callable[[list[TokenEvent]], None]) -> None:
        self.window_s = core.config.admission_window_s
        self.core = core
        self.inbox = inbox
        self.deliver = deliver

    def run(self) -> None:
        core, inbox = self.core, self.inbox
        while True:
            idle = not core.has_work()
            commands = inbox.wait(core.has_work)
            if idle and commands and self.window_s:
                # Waking from idle: requests sent together (a burst) start in one tick.
                time.sleep(self.window_s)
                commands += inbox.drain()
            if inbox.stopping:
                apply(core, commands)  # late arrivals end with "shutdown" too
                break
            apply(core, commands)
            try:
                events = core.step(hand_over=self.deliver)
            except Exception as exc:  # noqa: BLE001 - a bug in a tick must not kill serving
                log.exception("engine tick failed")
                events = core.abort_all("error", error=f"{type(exc).__name__}: {exc}")
            if events:
                self.deliver(events)
        self.deliver(core.abort_all("shutdown"))
