"""Where a long prompt's prefill goes on a GGUF (issue #48: an 8,000-token prompt's first
token at 1.5B): the whole prompt through the engine's runner in chunks of each --chunks
size (wall and process-CPU seconds, the chunks' times), then one layer's pieces on a chunk
at the prompt's start and at its end: the packed int8 linears (GFLOP/s, 2 * rows * N * K a
linear), the attention over the history, the norms.

    python -m bench.prefill_profile FILE.gguf [--tokens 8000] [--chunks 512,2048]

Compare GFLOP/s with the machine's int8 peak (vpdpbusd: 64 multiply-adds a cycle a core).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import mlx.core as mx

from engine.preload import ensure_preloads


def cpu_s() -> float:
    return time.process_time()


def timed(fn: Callable[[], object], n: int = 5) -> tuple[float, float]:
    """Median wall and process-CPU ms of `fn` (evaluated)."""
    fn()
    walls, cpus = [], []
    for _ in range(n):
        w, c = time.perf_counter(), cpu_s()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(cpu_s() - c)
    return sorted(walls)[n // 2] * 1e3, sorted(cpus)[n // 2] * 1e3


def whole_prompt(runner, tokens: int, chunk: int) -> dict[str, object]:
    from engine import cache as kv

    cache = kv.new_cache(runner.model)
    kv.size_for(cache, tokens + 16)
    prompt = [(i * 7919) % 40000 + 100 for i in range(tokens)]
    times = []
    w0, c0 = time.perf_counter(), cpu_s()
    for start in range(0, tokens, chunk):
        part = prompt[start:start + chunk]
        t = time.perf_counter()
        runner.prefill(cache, part, logits=start + chunk >= tokens)
        times.append(time.perf_counter() - t)
    return {"chunk": chunk, "wall_s": time.perf_counter() - w0, "cpu_s": cpu_s() - c0,
            "chunk_s": [round(t, 3) for t in times]}


def layer_pieces(runner, chunk: int, history: int) -> dict[str, tuple[float, float, float]]:
    """One layer's pieces on `chunk` rows after `history` positions: (wall ms, CPU ms,
    GFLOP/s of the wall time, 0 where not counted)."""
    from engine import cache as kv

    model = runner.model
    layer = model.model.layers[0]
    attn, mlp = layer.self_attn, layer.mlp
    attn_ns = type(attn).__call__.__globals__
    sdpa = attn_ns["scaled_dot_product_attention"]
    hidden = attn.q_proj.weight.shape[1] * 32 // attn.q_proj.bits
    heads, kv_heads = attn.n_heads, attn.n_kv_heads
    head_dim = attn.q_proj._native_n // heads
    inter = mlp.gate_proj._native_n
    h = mx.random.normal((1, chunk, hidden))
    g = mx.random.normal((1, chunk, inter))
    q = mx.random.normal((1, heads, chunk, head_dim))
    cache = kv.new_cache(model)[0]
    k = mx.random.normal((1, kv_heads, history + chunk, head_dim))
    keys, values = cache.update_and_fetch(k, k)
    mask = "causal"
    mx.eval(h, g, q, keys, values)

    def lin(*mods):
        return lambda x: mx.eval(*[m(x) for m in mods])

    out: dict[str, tuple[float, float, float]] = {}
    with runner._kernels():
        pieces = [
            ("q/k/v projections", lin(attn.q_proj, attn.k_proj, attn.v_proj), h,
             hidden * (attn.q_proj._native_n + attn.k_proj._native_n + attn.v_proj._native_n)),
            ("o projection", lin(attn.o_proj), mx.random.normal((1, chunk, heads * head_dim)),
             heads * head_dim * attn.o_proj._native_n),
            ("gate/up projections", lin(mlp.gate_proj, mlp.up_proj), h, 2 * hidden * inter),
            ("down projection", lin(mlp.down_proj), g, inter * mlp.down_proj._native_n),
        ]
        for name, fn, x, nk in pieces:
            wall, cpu = timed(lambda fn=fn, x=x: fn(x))
            out[name] = (wall, cpu, 2 * chunk * nk / wall / 1e6)
        flops = 4 * heads * head_dim * chunk * (history + chunk / 2)  # QK^T and PV, causal
        wall, cpu = timed(lambda: mx.eval(sdpa(q, keys, values, cache, scale=attn.scale,
                                               mask=mask)))
        out[f"attention over {history}+{chunk}"] = (wall, cpu, flops / wall / 1e6)
        wall, cpu = timed(lambda: mx.eval(layer.input_layernorm(h)))
        out["RMSNorm"] = (wall, cpu, 0.0)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.prefill_profile", description=__doc__)
    p.add_argument("model")
    p.add_argument("--tokens", type=int, default=8000)
    p.add_argument("--chunks", default="512,2048")
    p.add_argument("--pieces-only", action="store_true")
    args = p.parse_args(argv)
    from engine.loader import load_model
    from engine.model_runner import ModelRunner

    lm = load_model(args.model)
    runner = ModelRunner(lm.model)
    print(f"{lm.description}; load {os.getloadavg()[0]:.1f}", flush=True)
    chunks = [int(c) for c in args.chunks.split(",")]
    for chunk in chunks:
        for history in (0, args.tokens - chunk):
            print(f"one layer, a {chunk}-token chunk after {history} positions "
                  f"(wall ms, CPU ms, GFLOP/s):", flush=True)
            for name, (wall, cpu, gf) in layer_pieces(runner, chunk, history).items():
                print(f"  {name:32s} {wall:8.2f} {cpu:8.2f} {gf:7.1f}", flush=True)
    if not args.pieces_only:
        for chunk in chunks:
            r = whole_prompt(runner, args.tokens, chunk)
            print(f"{args.tokens} tokens in chunks of {chunk}: wall {r['wall_s']:.1f} s, "
                  f"CPU {r['cpu_s']:.1f} s, load {os.getloadavg()[0]:.1f}; chunks {r['chunk_s']}",
                  flush=True)
    return 0


if __name__ == "__main__":
    ensure_preloads()
    code = main()
    sys.stdout.flush()
    os._exit(code)  # MLX's static destructors can abort after worker-thread use (mlx#3126)
