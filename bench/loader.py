"""Micro-benchmarks behind docs/loader.md: fp32 matmul GFLOP/s and decode tok/s.

Run as ``python -m bench.loader [--quantized|--float32] [--tokens N]`` from a checkout (it
preloads OpenBLAS unless BATCHCHAT_NO_BLAS_PRELOAD=1), so both variants are measured the
same way.
"""

from __future__ import annotations

import statistics
import time

import mlx.core as mx

PROMPT = "Write a long story about a dragon who learns to bake bread."


def matmul_gflops(m: int = 2048, k: int = 576, n: int = 1536, runs: int = 3) -> list[float]:
    """GFLOP/s of an fp32 (m,k)@(k,n) matmul, one value per run."""
    a = mx.random.normal((m, k))
    b = mx.random.normal((k, n))
    mx.eval(a, b, a @ b)  # warm-up
    out = []
    for _ in range(runs):
        reps, t0 = 0, time.perf_counter()
        while True:
            mx.eval(a @ b)
            reps += 1
            if time.perf_counter() - t0 > 0.5:
                break
        out.append(2 * m * k * n * reps / (time.perf_counter() - t0) / 1e9)
    return out


def decode_tps(source: str = "bundled", quantized: bool | None = None, new_tokens: int = 64,
               runs: int = 3) -> tuple[str, list[float], list[float]]:
    """(description, decode tok/s per run, prompt tok/s per run) with mlx_lm.stream_generate.

    End tokens are masked so every run produces exactly ``new_tokens`` tokens.
    """
    from mlx_lm import stream_generate

    from engine.loader import load_model

    lm = load_model(source, quantized=quantized)
    prompt = lm.tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}],
                                              add_generation_prompt=True)
    eos = mx.array(sorted(lm.eos_token_ids))

    def no_eos(tokens: mx.array, logits: mx.array) -> mx.array:
        logits[..., eos] = -float("inf")
        return logits

    decode, prefill = [], []
    for i in range(runs + 1):
        last = None
        for last in stream_generate(lm.model, lm.tokenizer, prompt, max_tokens=new_tokens,  # noqa: B007
                                    logits_processors=[no_eos]):
            pass
        if i > 0 and last is not None:  # run 0 warms up
            assert last.generation_tokens == new_tokens
            decode.append(last.generation_tps)
            prefill.append(last.prompt_tps)
    return lm.description, decode, prefill


def main(quantized: bool | None, new_tokens: int) -> None:
    from engine.blas import blas_summary

    print(blas_summary())
    g = matmul_gflops()
    print(f"fp32 matmul 2048x576x1536: median {statistics.median(g):.1f} GFLOP/s "
          f"(runs: {', '.join(f'{x:.1f}' for x in g)})")
    desc, dec, pre = decode_tps(quantized=quantized, new_tokens=new_tokens)
    print(f"{desc}: decode median {statistics.median(dec):.2f} tok/s "
          f"(runs: {', '.join(f'{x:.2f}' for x in dec)}), prompt median "
          f"{statistics.median(pre):.1f} tok/s, {new_tokens} new tokens")


if __name__ == "__main__":
    import argparse

    from engine.preload import ensure_preloads

    parser = argparse.ArgumentParser(prog="python -m bench.loader", description=__doc__)
    q = parser.add_mutually_exclusive_group()
    q.add_argument("--quantized", dest="quantized", action="store_true", default=None)
    q.add_argument("--float32", dest="quantized", action="store_false")
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    ensure_preloads()  # before mlx computes anything; re-execs at most once
    main(args.quantized, args.tokens)
