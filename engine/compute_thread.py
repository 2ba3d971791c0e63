"""Threads that run engines' loops and never end.

MLX keeps per-thread state (the cache of `mx.compile`) whose destructor calls back into
Python when its OS thread ends. Python's `Thread.join` returns before those destructors run,
so a script that shut its engine down and returned had the thread's destructors race the
interpreter's finalization, and lose: "terminate called without an active exception",
exit 134 (issue #46). An engine's loop therefore runs on a parked daemon thread that
outlives the engine: a later engine reuses it, and the process ends with it asleep, when no
thread-local destructor runs. There are as many threads as engines ever ran at once.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

_idle: list[_ComputeThread] = []
_idle_lock = threading.Lock()
_count = 0


class Job:
    """One engine loop's run on a compute thread: `join` waits for the loop to return."""

    def __init__(self, work: Callable[[], None]) -> None:
        self.work = work
        self._done = threading.Event()

    def is_alive(self) -> bool:
        return not self._done.is_set()

    def join(self, timeout: float | None = None) -> None:
        self._done.wait(timeout)

    def _finish(self) -> None:
        self._done.set()


class _ComputeThread(threading.Thread):
    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()

    def run(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                job.work()  # the engine loop catches its own errors; this is a last guard
            finally:
                job.work = _done  # a parked thread must not keep an engine (its model) alive
                with _idle_lock:  # idle before the joiner wakes: its next engine reuses this
                    _idle.append(self)
                job._finish()
                del job


def _done() -> None:
    pass


def start(work: Callable[[], None]) -> Job:
    """Run `work` on an idle compute thread (a new one when none is idle)."""
    global _count
    job = Job(work)
    with _idle_lock:
        thread = _idle.pop() if _idle else None
        if thread is None:
            _count += 1
            thread = _ComputeThread(f"batchchat-engine-{_count}")
            thread.start()
    thread.jobs.put(job)
    return job
