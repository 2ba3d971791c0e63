"""A model load's progress, from the loading thread to the app's loop: one module for the
window's ModelHost (the default model) and the ModelManager (the models beside it)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

ProgressFn = Callable[[str, float], None]  # (stage, fraction 0..1), as Engine.load reports


def takes_progress(loader: Callable[..., Any]) -> bool:
    """Whether `loader` takes a `progress=` keyword (Engine.load's callback)."""
    try:
        params = inspect.signature(loader).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "progress" or p.kind == p.VAR_KEYWORD for p in params)


def progress_on_loop(handler: ProgressFn) -> ProgressFn:
    """A progress callback for a loading thread: hands (stage, fraction) to `handler` on
    the running loop, at most once per percent or stage (a loader may report thousands of
    steps). Call it on the loop."""
    loop = asyncio.get_running_loop()
    sent: list[Any] = [None, -1.0]

    def report(stage: str, fraction: float) -> None:
        if stage == sent[0] and fraction < 1.0 and fraction - sent[1] < 0.01:
            return
        sent[:] = [stage, fraction]
        if not loop.is_closed():
            loop.call_soon_threadsafe(handler, stage, fraction)

    return report
