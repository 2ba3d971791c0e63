"""`python -m bench.float_linears MODEL.gguf [--rows 1 8] [--tokens 8] [--prompt 128]
[--passes 2]`: an unquantized (F32/F16/BF16) GGUF's decode and prefill with its float
linears on the native fixed-order product (engine/native/float_layers.py, the default)
against MLX's matmul on OpenBLAS (as before), in one process on the same loaded weights,
passes alternated A B B A so a busy machine's drift falls on both. Per form and row count:
median wall ms and process CPU ms a generated token (bench.arch_decode.decode_rate), and
the wall seconds of one prompt's prefill to its first token.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from unittest import mock

import numpy as np

from engine.preload import ensure_preloads


def _first_token_s(loaded, prompt: int) -> float:
    from engine import Engine, EngineConfig, SamplingParams

    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=[],
                    context_length=loaded.context_length, config=EngineConfig())
    ids = np.random.default_rng(prompt).integers(3, 250, prompt).tolist()
    got: list[int] = []
    engine.submit(prompt_tokens=ids, params=SamplingParams(max_tokens=1)).listen(
        lambda e: got.append(1) if e.token is not None else None)
    start = time.perf_counter()
    while not got:
        engine.step()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--passes", type=int, default=2)
    args = ap.parse_args()
    ensure_preloads()
    from bench.arch_decode import decode_rate
    from engine.loader import load_model
    from engine.native import float_layers

    start = time.perf_counter()
    loaded = load_model(args.model)
    print(f"loaded {loaded.description} in {time.perf_counter() - start:.1f} s")

    def run(form: str) -> dict:
        off = mock.patch.object(float_layers, "engine_module", lambda mod, options: None)
        with off if form == "blas" else contextlib.nullcontext():
            out = {r: decode_rate(loaded, r, args.tokens) for r in args.rows}
            out["prefill"] = _first_token_s(loaded, args.prompt)
        return out

    results: dict[str, list[dict]] = {"blas": [], "native": []}
    for i in range(args.passes):
        for form in (("blas", "native") if i % 2 == 0 else ("native", "blas")):
            results[form].append(run(form))
            print(f"pass {i} {form}: {results[form][-1]}", flush=True)
    for form, runs in results.items():
        for r in args.rows:
            wall = statistics.median(1e3 / x[r][0] * r for x in runs)
            cpu = statistics.median(x[r][1] for x in runs)
            print(f"{form:6s} rows {r:2d}: {wall:8.1f} ms wall a step, {cpu:8.1f} ms CPU a token")
        print(f"{form:6s} prefill {args.prompt} tokens: "
              f"{statistics.median(x['prefill'] for x in runs):.2f} s to the first token")


if __name__ == "__main__":
    main()
