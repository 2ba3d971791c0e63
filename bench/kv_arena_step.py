"""`python -m bench.kv_arena_step`: the decode batch's two KV layouts on the bundled model
(issue #47): slot rows (engine/slot_cache.py) against rows as ranges of one arena per layer
(engine/kv_arena.py, BATCHCHAT_KV_ARENA=1).

8 rows of 600-1,230 prompt keys (random tokens) in each layout; `--rounds` compiled decode
steps of each, alternated, median process-CPU and wall ms a step; then a 9th row of 1,000
keys joins each (the slot batch made with room for 8 rows, so it grows; the arena has room
or doubles), its CPU and wall ms, and the KV bytes each layout holds after:

    python -m bench.kv_arena_step [--rounds 40]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import mlx.core as mx

from engine.preload import ensure_preloads


def main(argv: list[str] | None = None) -> int:
    ensure_preloads()
    from engine import cache as kv
    from engine.cpu_options import CpuOptions
    from engine.loader import load_model
    from engine.model_runner import ModelRunner

    parser = argparse.ArgumentParser(prog="python -m bench.kv_arena_step")
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args(argv)
    runner = ModelRunner(load_model("bundled").model, cpu=CpuOptions(kv_arena=True))
    rng = random.Random(0)
    solo = []
    for i in range(9):
        cache = kv.new_cache(runner.model)
        n = 1000 if i == 8 else 600 + 90 * i
        runner.prefill(cache, [rng.randrange(1000, 30000) for _ in range(n)])
        solo.append(cache)
    batches = {"slot rows": kv.start_batch(solo[:8], 8),
               "arena ranges": kv.start_batch(solo[:8], arena=True)}
    tokens = [5] * 8
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in batches}
    for i in range(args.rounds + 4):
        order = list(batches.items())
        for name, batch in order if i % 2 == 0 else reversed(order):
            cpu, wall = time.process_time(), time.perf_counter()
            mx.eval(runner.decode(batch, tokens))
            if i >= 4:  # the first steps trace the graphs
                times[name].append(((time.process_time() - cpu) * 1000,
                                    (time.perf_counter() - wall) * 1000))
    for name, t in times.items():
        print(f"{name}: a step CPU {statistics.median(c for c, _ in t):.1f} ms, "
              f"wall {statistics.median(w for _, w in t):.1f} ms")
    for name, batch in batches.items():
        cpu, wall = time.process_time(), time.perf_counter()
        kv.add_rows(batch, [solo[8]], 9)
        mx.eval([x for layer in batch for x in layer.state[:2]])
        print(f"{name}: a 1,000-key row joins: CPU {(time.process_time() - cpu) * 1000:.1f} ms, "
              f"wall {(time.perf_counter() - wall) * 1000:.1f} ms; KV held "
              f"{sum(layer.nbytes for layer in batch) / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
