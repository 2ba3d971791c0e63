"""The first request's one-time costs, paid while the model loads (issue #48).

On the CPU backend MLX compiles each fused kernel of an `mx.compile`d graph (the decode step's,
engine/compiled_step.py, and the kernels' in engine/cpu_kernels.py) with the system's C++
compiler the first time the process meets it, and keeps the library in
$TMPDIR/mlx/<version>/cpu for later processes. That took ~0.8 s a kernel on the 2-core dev
machine, 15 kernels for a model of a new kind: the first reply after a load stopped for 12 s
after its first token (a 1.5B Q4_K_M GGUF; 10.5 s on the bundled model the first time),
and every ladder cell's first request was its slowest (docs/performance.md). The traces of
the compiled step for each shape come on top, ~tens of ms each.

So `Engine.load` runs two short requests before it returns, as llama.cpp's server decodes
a warm-up batch at load: one with the chat tabs' sampling and one greedy, submitted together
(a prompt pass for both, a decode batch of two rows, then one row alone), through the
engine's own submit and tick. They run on a scratch core that shares the engine's model
runner (its compiled graphs) and nothing else: no statistics, cached prefixes, budget
learning or disk store of the engine's see them. On a compute thread: mx.compile's traces
are kept per thread, and the engine's loop takes the same parked thread next
(engine/compute_thread.py). A warm-up that fails leaves the engine as it was; the first
request then pays instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from . import compute_thread
from .engine_core import EngineCore
from .speculation import draft_path
from .worker import apply

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger(__name__)

MESSAGES = [{"role": "user", "content": "Hello! Say something short."}]
# the chat tabs' default sampling (app/settings.py) and greedy: each row's own sampler path
REQUESTS: list[dict[str, Any]] = [
    {"temperature": 0.7, "top_p": 0.95, "min_p": 0.05, "repetition_penalty": 1.1,
     "max_tokens": 4, "seed": 0},
    {"max_tokens": 8},
]


def scratch_core(engine: Engine, core: EngineCore) -> EngineCore:
    """A core for the warm-up: `core`'s model runner, everything else its own; no disk
    store, and n-gram drafts where the engine drafts with a model (not shared)."""
    config = replace(engine.config, kv_disk_dir=None)
    if draft_path(config.speculative) is not None:
        config = replace(config, speculative="ngram")
    return EngineCore(core.model, core.eos_token_ids, core.context_length, config,
                      on_admit=engine._admitted, on_finish=engine._finished,
                      vision=core.vision, runner=core.runner)


def run_requests(submit: Callable[..., Any], step: Callable[[], Any],
                 has_work: Callable[[], bool]) -> None:
    """The warm-up's requests, submitted together and stepped to their end."""
    streams = [submit(MESSAGES, params=params, request_id=f"warm-up-{i}")
               for i, params in enumerate(REQUESTS)]
    while has_work():
        step()
    for stream in streams:
        if stream.error is not None:
            raise RuntimeError(f"warm-up request failed: {stream.error}")


def warm_up(engine: Engine) -> float | None:
    """Run the warm-up on `engine` (not started) on a compute thread. The seconds it
    took, or None if it failed (logged; the engine is as it was)."""
    if engine.running:
        raise RuntimeError("warm_up is for an engine that was not started")
    real = engine._core
    failure: list[BaseException] = []

    def work() -> None:
        scratch = engine._core = scratch_core(engine, real)
        try:
            run_requests(engine.submit, engine.step, engine.has_work)
        except Exception as exc:  # noqa: BLE001 - any reason: the first request pays
            failure.append(exc)
            # what it submitted ends there: none reaches the engine's core, streams or counts
            apply(scratch, engine._inbox.drain())
            engine._deliver(scratch.abort_all("shutdown"))
        finally:
            engine._core = real

    t = time.perf_counter()
    compute_thread.start(work).join()
    if failure:
        log.warning("warm-up at load failed (%s): the first request will be slower",
                    failure[0])
        return None
    return time.perf_counter() - t
