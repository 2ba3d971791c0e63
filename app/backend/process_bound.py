"""The process's memory bound over every local model it runs (issue #46 item 14).

One model's bound is its process's memory once it was ready plus its KV budget plus
app/process_memory.py's OVERHEAD_BYTES (`memory_bound`). With several models loaded (issue
#50) RSS is the process's, so each engine keeps under the same figure: the memory once the
last of them was ready (the others' weights in it) plus every one's KV budget plus the
overhead; an earlier model's KV in use at that moment is counted twice, which errs on the
side of evicting less. Each engine is told the figure whenever a model starts or stops
(Engine.set_memory_limit).
"""

from __future__ import annotations

import weakref
from typing import Protocol

from ..process_memory import memory_bound


class Bounded(Protocol):
    resident_at_start: int | None

    def kv_budget_bytes(self) -> int: ...

    def set_memory_limit(self, n: int | None) -> None: ...


# The running local models of this process (weakly: one dropped without a shutdown, as some
# tests do, leaves the figure when it is collected)
_running: weakref.WeakSet[Bounded] = weakref.WeakSet()


def process_bound() -> int | None:
    """The most this process should hold with the models it runs now (None: none runs, or
    none could tell its memory)."""
    known = [t for t in list(_running) if t.resident_at_start is not None]
    if not known:
        return None
    return memory_bound(max(t.resident_at_start or 0 for t in known),
                        sum(t.kv_budget_bytes() for t in known))


def started(target: Bounded) -> None:
    """`target` is ready: every running model keeps under the new figure."""
    _running.add(target)
    _tell()


def stopped(target: Bounded) -> None:
    """`target` stopped: the others keep under the figure without it."""
    _running.discard(target)
    _tell()


def _tell() -> None:
    bound = process_bound()
    for target in list(_running):
        target.set_memory_limit(bound)
