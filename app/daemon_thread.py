"""A blocking call awaited from asyncio in a daemon thread: a slow model load never holds
up the process's exit (an executor's threads are joined at exit; a daemon thread is not)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

A = TypeVar("A")
R = TypeVar("R")


async def in_daemon_thread(fn: Callable[[A], R], arg: A, name: str) -> R:
    """`fn(arg)` on a daemon thread named `name`; its result or its exception, here. A
    caller that stops waiting leaves the thread to finish on its own."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[R] = loop.create_future()

    def settle(result: R | None, exc: BaseException | None) -> None:
        if future.done():
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result, exc = fn(arg), None
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            result, exc = None, e
        if not loop.is_closed():
            loop.call_soon_threadsafe(settle, result, exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return await future
