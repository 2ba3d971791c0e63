"""While the app's Qt loop is open, cyclic garbage is collected on the UI thread, never on
the thread that happens to allocate (the engine's worker): PySide crashes destroying Qt
wrappers off their thread (ui/ui_thread_gc.py). Closing the loop gives the collection back."""

from __future__ import annotations

import asyncio
import gc
import threading

from tests.ui.conftest import run_until
from ui.event_loop import make_loop
from ui.ui_thread_gc import UiThreadCollector


class Cycle:
    """Half of a reference cycle that records the thread it was collected on."""

    collected_on: list[str] = []

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        Cycle.collected_on.append(threading.current_thread().name)


def test_a_worker_threads_allocations_never_collect_there(qapp) -> None:
    was_enabled = gc.isenabled()
    gc.enable()
    loop = make_loop(qapp)
    try:
        assert not gc.isenabled()
        Cycle.collected_on = []

        def allocate() -> None:  # the engine's worker: many objects, some in cycles
            for _ in range(50):
                _ = [[i] for i in range(20_000)]  # well past generation 0's threshold
                for _ in range(20):
                    Cycle()

        worker = threading.Thread(target=allocate, name="worker")
        worker.start()
        worker.join()
        assert "worker" not in Cycle.collected_on
        # the UI thread's timer collects; under load a 0.5 s sleep could end before the
        # timer's first tick was dispatched, so wait for it (up to 10 s)
        run_until(loop, lambda: len(Cycle.collected_on) >= 1000, timeout=10.0)
        assert len(Cycle.collected_on) == 1000
        assert set(Cycle.collected_on) == {threading.main_thread().name}
    finally:
        loop.close()
        asyncio.set_event_loop(None)
    assert gc.isenabled()
    if not was_enabled:
        gc.disable()


def test_what_lives_when_the_loop_opens_is_frozen_out_of_full_collections(qapp) -> None:
    """A full collection on the UI thread must not walk the app's imports each time (174
    CPU-ms on the app's ~195,000 objects, a stall): they are frozen when the loop opens."""
    kept = [[] for _ in range(5000)]  # alive before the collector starts
    before = gc.get_freeze_count()
    collector = UiThreadCollector()
    try:
        assert gc.get_freeze_count() >= before + len(kept)
        Cycle.collected_on.clear()
        Cycle()  # made after: its cycle is still collected
        gc.collect()
        assert Cycle.collected_on
    finally:
        collector.stop()
