"""One decode step of the bundled model through the engine's ModelRunner, with the native
kernels' switches flipped round by round in one process (issue #19's A/B of each kernel).

    python -m bench.kernels.step [--rows 1,16] [--context 200] [--rounds 5]

Variants: `base` (native matvec and attention, MLX's own RoPE/RMSNorm/SiLU), `+rowwise`
(native RoPE, RMSNorm, SiLU x up), `+int8` (also int8 activations in the matvec). Each
sample is the median of 10 greedy steps (graph built, evaluated, token read back) on a
cache of `--context` tokens; the table shows medians of the rounds, ms a step and tok/s.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

from engine.preload import ensure_preloads

VARIANTS = {"base": ("0", False), "+rowwise": ("1", False), "+int8": ("1", True)}


def main(argv: list[str] | None = None) -> None:
    ensure_preloads()
    parser = argparse.ArgumentParser(prog="python -m bench.kernels.step")
    parser.add_argument("--rows", default="1,16")
    parser.add_argument("--context", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", default="bundled")
    args = parser.parse_args(argv)

    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from engine import native
    from engine.cpu_options import CpuOptions
    from engine.loader import load_model
    from engine.model_runner import ModelRunner

    cpu = CpuOptions.from_env()
    lm = load_model(args.model, cpu=cpu)
    runner = ModelRunner(lm.model, cpu=cpu)
    linears = [m for _, m in runner.model.named_modules() if hasattr(m, "_native_int8")]
    print(native.info(), f"| {len(linears)} linears on the kernel")

    def caches(rows: int) -> list:
        out = []
        for r in range(rows):
            cache = make_prompt_cache(lm.model)
            runner.prefill(cache, [(i * 31 + r) % 5000 + 100 for i in range(args.context)])
            out.append(cache)
        return out

    def step_ms(cache, rows: int) -> float:
        tokens = [7] * rows
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            picked = mx.argmax(runner.decode(cache, tokens), axis=-1)
            picked.tolist()
            times.append(time.perf_counter() - t0)
            for layer in cache:
                layer.trim(1)
        return statistics.median(times) * 1e3

    from engine import cache as kv

    rows_list = [int(r) for r in args.rows.split(",")]
    batches = {}
    for rows in rows_list:
        cs = caches(rows)
        batches[rows] = cs[0] if rows == 1 else kv.merge(cs)
    results: dict[tuple[int, str], list[float]] = {}
    for _ in range(args.rounds):
        for rows in rows_list:
            for name, (rowwise, int8) in VARIANTS.items():
                # read when each pass starts (cpu_kernels.active)
                runner.cpu = dataclasses.replace(cpu, rowwise=rowwise == "1")
                for m in linears:
                    object.__setattr__(m, "_native_int8", int8)
                results.setdefault((rows, name), []).append(step_ms(batches[rows], rows))
    print(f"\ncontext {args.context} tokens, medians of {args.rounds} rounds")
    print("| rows | " + " | ".join(f"{v} ms | tok/s" for v in VARIANTS) + " | base / +int8 |")
    print("|---|" + "---|---|" * len(VARIANTS) + "---|")
    for rows in rows_list:
        med = {v: statistics.median(results[(rows, v)]) for v in VARIANTS}
        cells = " | ".join(f"{med[v]:.1f} | {rows * 1e3 / med[v]:.1f}" for v in VARIANTS)
        print(f"| {rows} | {cells} | {med['base'] / med['+int8']:.2f}x |")


if __name__ == "__main__":
    main()
    os._exit(0)  # MLX's static destructors can abort after worker-thread use (mlx#3126)
