"""The native attention kernel on or off, in the bundled model's forward passes.

    python -m bench.kernels.attention [--history 400,1000] [--rounds 5]

A decode step (one token) and a next turn's chunk (18 tokens) over a KV cache of
`--history` tokens, through the engine's ModelRunner: float32 weights (today's CPU path)
and quantized weights on the native matvec kernel. On and off are interleaved round by
round in one process (the runner's CpuOptions.attention is read when each pass starts);
medians printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable

from engine.preload import ensure_preloads


def main(argv: list[str] | None = None) -> None:
    ensure_preloads()
    parser = argparse.ArgumentParser(prog="python -m bench.kernels.attention")
    parser.add_argument("--history", default="400,1000")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from engine.cpu_options import CpuOptions
    from engine.loader import load_model
    from engine.model_runner import ModelRunner

    cpu = CpuOptions.from_env()
    f32 = load_model("bundled", quantized=False)
    q = load_model("bundled", quantized=True)
    # the quantized linears as this benchmark measured them: float32 activations, the
    # kernel up to 32 rows (issue #19's defaults)
    runners = {"float32": ModelRunner(f32.model, cpu=cpu),
               "quantized+native": ModelRunner(q.model, cpu=dataclasses.replace(
                   cpu, int8=False, qmv_max_rows=32))}
    bases = {name: runner.cpu for name, runner in runners.items()}
    for history in (int(h) for h in args.history.split(",")):
        caches = {}
        for name, runner in runners.items():
            caches[name] = make_prompt_cache(runner.model)
            runner.prefill(caches[name], list(range(100, 100 + history)))

        def decode(runner: ModelRunner, cache: list) -> None:
            mx.eval(runner.decode(cache, [42]))
            for layer in cache:
                layer.trim(1)

        def chunk(runner: ModelRunner, cache: list) -> None:
            runner.prefill(cache, list(range(500, 518)), logits=True)
            for layer in cache:
                layer.trim(18)

        cases: dict[str, tuple[Callable, str, int]] = {}
        for name in runners:
            cases[f"{name} decode"] = (decode, name, 6)
            cases[f"{name} next turn (18)"] = (chunk, name, 2)
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for switch in ("1", "0"):
                for name, runner in runners.items():  # read when each pass starts
                    runner.cpu = dataclasses.replace(bases[name], attention=switch == "1")
                for case, (fn, name, reps) in cases.items():
                    for _ in range(reps):
                        t = time.perf_counter()
                        fn(runners[name], caches[name])
                        times.setdefault((case, switch), []).append(time.perf_counter() - t)
        for name, runner in runners.items():
            runner.cpu = bases[name]
        print(f"\nhistory {history} tokens | kernel on ms | off ms | off / on (medians)")
        for case in cases:
            on = statistics.median(times[(case, "1")]) * 1e3
            off = statistics.median(times[(case, "0")]) * 1e3
            print(f"| {case} | {on:.1f} | {off:.1f} | {off / on:.2f}x |")


if __name__ == "__main__":
    main()
