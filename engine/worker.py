"""The engine loop: drains an inbox, runs ticks, hands events to the asyncio loop."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from . import cpu_memory
from .engine_core import EngineCore
from .token_event import TokenEvent

log = logging.getLogger(__name__)

# ("add", Sequence) | ("cancel", request_id) | ("save", (token ids, Future of the count))
Command = tuple[str, Any]
# How long the engine is idle before it gives memory kept for reuse back (release): long
# enough that a chat's next turn, or a client's next request, finds it still there.
IDLE_RELEASE_S = 2.0


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

    def wait(self, busy: Callable[[], bool], timeout: float | None = None) -> list[Command]:
        """Block until there is a command, work to do, or a stop (or `timeout` seconds have
        passed); then drain."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cv:
            while not self._items and not busy() and not self.stopping:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self.cv.wait(left)
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
                 deliver: Callable[[list[TokenEvent]], None],
                 release: Callable[[], None] = lambda: None) -> None:
        self.window_s = core.config.admission_window_s
        self.core = core
        self.inbox = inbox
        self.deliver = deliver
        self.release = release  # gives back memory kept for reuse (see IDLE_RELEASE_S)

    def run(self) -> None:
        core, inbox = self.core, self.inbox
        release_due = True  # a model switch: what the engine before this one left behind
        while True:
            idle = not core.has_work()
            if release_due:  # idle for IDLE_RELEASE_S, not merely between two requests
                release_due = False
                commands = inbox.wait(core.has_work, timeout=IDLE_RELEASE_S)
                if not commands and not core.has_work() and not inbox.stopping:
                    self.release()
                    continue
            else:
                commands = inbox.wait(core.has_work)
            if idle and commands and self.window_s:
                # Waking from idle: requests sent together (a burst) start in one tick.
                time.sleep(self.window_s)
                commands += inbox.drain()
            if inbox.stopping:
                apply(core, commands)  # late arrivals end with "shutdown" too
                break
            apply(core, commands)
            worked = core.has_work()
            try:
                events = core.step(hand_over=self.deliver)
            except Exception as exc:  # noqa: BLE001 - a bug in a tick must not kill serving
                log.exception("engine tick failed")
                events = core.abort_all("error", error=f"{type(exc).__name__}: {exc}")
            if events:
                self.deliver(events)
            cpu_memory.bound_freed_memory()  # busy for long: glibc's spare stays bounded
            release_due = release_due or (worked and not core.has_work())
        self.deliver(core.abort_all("shutdown"))
