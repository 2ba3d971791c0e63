"""A script or notebook on the engine API exits 0 (issue #46: it aborted at exit).

MLX's per-thread compile cache is destroyed when its OS thread ends, calling into Python; an
engine thread that ended while the interpreter finalized aborted the process. The engine's
loop now runs on a compute thread that never ends (engine/compute_thread.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from engine import SamplingParams, testing
from engine.config import WARM_UP_OFF_ENV

ROOT = Path(__file__).resolve().parents[2]


def test_engine_api_script_exits_cleanly_every_time() -> None:
    for run in range(3):  # the abort was a race: several runs
        # as a user runs it: with Engine.load's warm-up and its grammar-tokenizer thread
        # (the suite turns the warm-up off for the processes it starts)
        env = {k: v for k, v in os.environ.items() if k != WARM_UP_OFF_ENV}
        result = subprocess.run([sys.executable, "-m", "tests.engine.exit_workload"],
                                capture_output=True, text=True, cwd=ROOT, timeout=300,
                                env=env)
        assert (result.returncode, result.stdout.strip()) == (0, "returned"), (
            f"run {run + 1}: exit {result.returncode}\n{result.stderr[-2000:]}")
        assert "Fatal Python error" not in result.stderr
        assert "terminate called" not in result.stderr


async def test_the_engine_thread_outlives_the_engine_and_is_reused(make_engine) -> None:
    threads: list[threading.Thread] = []
    for _ in range(2):
        engine = make_engine()
        deliver = engine._deliver_threadsafe

        def record(events, deliver=deliver) -> None:  # runs on the engine thread
            threads.append(threading.current_thread())
            deliver(events)

        engine._deliver_threadsafe = record
        await engine.start()
        stream = engine.submit(prompt_tokens=[1, 2], params=SamplingParams(max_tokens=3))
        await stream.result()
        await engine.shutdown()
        assert not engine.running
        # Parked, not ended: an ending thread runs MLX's thread-local destructors.
        assert threads[-1].is_alive()
    assert threads[0] is threads[-1]


async def test_a_parked_engine_thread_keeps_nothing_of_its_engine(make_engine) -> None:
    import gc
    import weakref

    engine = make_engine()
    await engine.start()
    await engine.submit(prompt_tokens=[1, 2], params=SamplingParams(max_tokens=3)).result()
    model = weakref.ref(testing.facts(engine).module_tree)  # the core holds it (its runner)
    await engine.shutdown()
    del engine
    gc.collect()
    assert model() is None  # the model and its caches went with the engine, the core too
