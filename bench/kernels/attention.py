"""The native attention kernel on or off, in the bundled model's forward passes.

    python -m bench.kernels.attention [--history 400,1000] [--rounds 5]

A decode step (one token) and a next turn's chunk (18 tokens) over a KV cache of
`--history` tokens, through the engine's ModelRunner: float32 weights (today's CPU path)
and quantized weights on the native matvec kernel. On and off are interleaved round by
round in one process (BATCHCHAT_NATIVE_ATTENTION is read at every call); medians printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from engine.blas import ensure_fast_blas


def main(argv: list[str] | None = None) -> None:
    ensure_fast_blas()
    parser = argparse.ArgumentParser(prog="python -m bench.kernels.attention")
    parser.add_argument("--history", default="400,1000")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from engine.cpu_kernels import NATIVE_ATTENTION_ENV
    from engine.loader import load_model
    from engine.model_runner import ModelRunner
    from engine.native import patch

    f32 = load_model("bundled", quantized=False)
    q = load_model("bundled", quantized=True)
    runners = {"float32": ModelRunner(f32.model), "quantized+native": ModelRunner(q.model)}
    patch.install(q.model)
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
                os.environ[NATIVE_ATTENTION_ENV] = switch
                for case, (fn, name, reps) in cases.items():
                    for _ in range(reps):
                        t = time.perf_counter()
                        fn(runners[name], caches[name])
                        times.setdefault((case, switch), []).append(time.perf_counter() - t)
        os.environ.pop(NATIVE_ATTENTION_ENV, None)
        print(f"\nhistory {history} tokens | kernel on ms | off ms | off / on (medians)")
        for case in cases:
            on = statistics.median(times[(case, "1")]) * 1e3
            off = statistics.median(times[(case, "0")]) * 1e3
            print(f"| {case} | {on:.1f} | {off:.1f} | {off / on:.2f}x |")


if __name__ == "__main__":
    main()
