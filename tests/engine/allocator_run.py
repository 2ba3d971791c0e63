"""Run by test_allocator.py in a fresh process, as an entry point runs: ensure_preloads()
first (it re-executes onto mimalloc unless opted out), then MLX. Prints, as JSON, which
malloc serves the process, what cpu_memory makes of it, the RSS rises (MiB) while 384 MiB
of buffers are live, 2 s after they are freed (no call: the allocator's own give-back) and
after give_back_freed_memory(), the page faults of one pass of the exp kernel on 8 MB
buffers (freed buffers reused, or fresh pages faulted in), and what a program the app starts
would get of LD_PRELOAD and mimalloc's setting."""

from __future__ import annotations

import json
import time

from engine.preload import ensure_preloads

if __name__ == "__main__":
    ensure_preloads()
    import mlx.core as mx

    from app.process_memory import resident_bytes
    from engine import allocator, cpu_memory
    from engine.preload import child_environment
    from tests.engine.page_faults import faults_per_exp_pass

    tuned = cpu_memory.keep_freed_memory()  # what the model runner does on the CPU
    faults = faults_per_exp_pass()

    base = resident_bytes() or 0
    blocks = [mx.ones((4 << 20,), dtype=mx.float32) for _ in range(24)]  # 16 MiB each
    mx.eval(blocks)
    live = resident_bytes() or 0
    del blocks
    mx.clear_cache()  # MLX's own buffer cache is not what is measured
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:  # a process that goes on allocating a little
        mx.eval(mx.ones((256,)) + 1)
        time.sleep(0.05)
    waited = resident_bytes() or 0
    gave = cpu_memory.give_back_freed_memory()
    after = resident_bytes() or 0
    print(json.dumps({
        "mimalloc": allocator.is_mimalloc_loaded(), "summary": allocator.summary(),
        "tuned": tuned, "heap": cpu_memory.heap_bytes() is not None, "gave": gave,
        "faults_per_pass": faults, "child_ld_preload": child_environment().get("LD_PRELOAD"),
        "child_purge_delay": child_environment().get("MIMALLOC_PURGE_DELAY"),
        "rise_mib": [(v - base) >> 20 for v in (live, waited, after)]}))
