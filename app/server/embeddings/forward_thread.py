"""One parked daemon thread that runs the embedding forwards, one at a time, off the event
loop: the loop (and the chat engine's ticks, which run on the engine's own thread) never
wait for a forward. The thread never ends: MLX's per-thread state must not be torn down
while the interpreter finalises (the reason engine/compute_thread.py parks its threads)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_jobs: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = \
    queue.SimpleQueue()
_started = threading.Lock()
_thread: threading.Thread | None = None


def _work() -> None:
    while True:
        job, done = _jobs.get()
        if not done.set_running_or_notify_cancel():
            continue
        try:
            done.set_result(job())
        except BaseException as exc:  # noqa: BLE001 - the awaiting request hears of it
            done.set_exception(exc)


def submit(job: Callable[[], T]) -> concurrent.futures.Future[T]:
    """`job()` queued for the forward thread (started at the first job)."""
    global _thread
    with _started:
        if _thread is None:
            _thread = threading.Thread(target=_work, name="embeddings", daemon=True)
            _thread.start()
    done: concurrent.futures.Future[T] = concurrent.futures.Future()
    _jobs.put((job, done))
    return done


async def run(job: Callable[[], T]) -> T:
    """`job()`'s result, computed on the forward thread."""
    return await asyncio.wrap_future(submit(job))


def call(job: Callable[[], T]) -> T:
    """`job()`'s result, computed on the forward thread and waited for here: from a worker
    thread (attachment retrieval), never from the forward thread itself or the loop."""
    if threading.current_thread() is _thread:
        raise RuntimeError("forward_thread.call from the forward thread would wait forever")
    return submit(job).result()
