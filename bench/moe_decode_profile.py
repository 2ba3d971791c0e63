"""`python -m bench.moe_decode_profile [--rows 1 8] [--hidden 1024] [--layers 6]
[--experts 32 --used 4] [--gguf FILE]`: where a MoE decode step's time goes today, on a
random-weight qwen3moe GGUF (bench.arch_decode's file: Q4_0 linears, a Q8_0 embedding and
head; or --gguf, e.g. the model ladder's qwen3moe-1.5b-Q4_K_M.gguf) run by
the engine's copy of the model (its native layers, experts grouped on the packed kernel;
where the tree has engine/native/moe_blocks.py, SwiGLU and the weighted sum inside the
grouped ops, timed as two pieces).

Each piece of the first layer is evaluated on its own, on inputs of a decode step's shape
(`rows` rows of one token, a 64-token context), median of repeated calls, and multiplied by
the layer count: the attention half (its norm, projections, RoPE, cached attention), the
MoE block's router linear, its routing ops (softmax, top-k, the scores' normalisation: MLX
ops), the experts' gate+up (one grouped op), the SwiGLU between, the down projection
(grouped), the weighted sum of the k outputs; then the final norm and head. The whole step
(all layers in one graph) is printed beside the sum, so the per-eval overhead of timing
pieces apart is visible."""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import mlx.core as mx

from bench.arch_decode import write
from bench.physical import memory_bandwidth_gbs
from engine.preload import ensure_preloads


def round_robin(pieces: dict[str, Callable[[], object]],
                rounds: int) -> dict[str, tuple[float, float]]:
    """Each piece's median wall and process-CPU milliseconds a call, the pieces timed in
    turn round after round (on a shared machine a burst of load then hits all of them
    alike, not whichever was being timed)."""
    for fn in pieces.values():
        mx.eval(fn())
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in pieces}
    for _ in range(rounds):
        for name, fn in pieces.items():
            t, c = time.perf_counter(), time.process_time()
            mx.eval(fn())
            got[name].append((time.perf_counter() - t, time.process_time() - c))
    mid = rounds // 2
    return {name: (sorted(v[0] for v in runs)[mid] * 1e3, sorted(v[1] for v in runs)[mid] * 1e3)
            for name, runs in got.items()}


def profile(model, rows: int, layers: int, rounds: int, bandwidth: float) -> None:
    from mlx_lm.models.cache import make_prompt_cache

    from engine import native
    from engine.native.switch_layers import grouped_call

    inner = model["model"]
    layer = inner.layers[0]
    moe, attn = layer.mlp, layer.self_attn
    glu = moe.switch_mlp
    hidden = layer.input_layernorm.weight.shape[0]
    cache = make_prompt_cache(model)
    prompt = mx.array([[(i * 7 + r) % 250 + 3 for i in range(64)] for r in range(rows)])
    mx.eval(model(prompt, cache=cache))
    tokens = mx.array([[5 + r] for r in range(rows)])
    x = mx.random.normal((rows, 1, hidden)) * 0.5
    h = layer.post_attention_layernorm(x)
    logits = moe.gate(h)
    gates = mx.softmax(logits, axis=-1, precise=True)
    k = moe.top_k

    def route(g):
        inds = mx.argpartition(g, kth=-k, axis=-1)[..., -k:]
        scores = mx.take_along_axis(g, inds, axis=-1)
        if moe.norm_topk_prob:
            scores = scores / mx.sum(scores, axis=-1, keepdims=True)
        return inds, scores

    inds, scores = route(gates)
    xe = mx.expand_dims(h, (-2, -3))
    x_gate, x_up = grouped_call((glu.gate_proj, glu.up_proj), xe, inds)
    act = glu.activation(x_up, x_gate)
    y = glu.down_proj(act, inds).squeeze(-2)
    mx.eval(h, logits, gates, inds, scores, x_gate, x_up, act, y)
    kv = cache[0]

    def attention_half():
        out = attn(layer.input_layernorm(x), mask=None, cache=kv)
        kv.offset -= 1  # keep the context at its length: each call writes one position
        return out

    pieces: dict[str, Callable[[], object]] = {
        "attention half (norm, q/k/v/o, RoPE, cached attn)": attention_half,
        "post-attention norm": lambda: layer.post_attention_layernorm(x),
        "router linear": lambda: moe.gate(h),
        "routing (softmax, top-k, normalise)": lambda: route(
            mx.softmax(logits, axis=-1, precise=True)),
    }
    fused = getattr(glu, "weighted", None) is not None and glu.weighted(h, inds, scores) \
        is not None
    if fused and hasattr(native, "moe_route"):  # engine/native/moe_blocks.py's routing op
        del pieces["routing (softmax, top-k, normalise)"]
        pieces["routing (one native op)"] = lambda: native.moe_route(
            logits, k, bool(moe.norm_topk_prob))
    if fused:  # engine/native/moe_blocks.py: SwiGLU and the weighted sum inside the ops
        from engine.native.switch_layers import SWIGLU, WEIGHTED_SUM

        (act,) = grouped_call((glu.gate_proj, glu.up_proj), xe, inds, SWIGLU)
        mx.eval(act)
        pieces["experts gate+up+SwiGLU (grouped op)"] = lambda: grouped_call(
            (glu.gate_proj, glu.up_proj), xe, inds, SWIGLU)
        pieces["experts down+weighted sum (grouped op)"] = lambda: grouped_call(
            (glu.down_proj,), act, inds, WEIGHTED_SUM, scores)
    else:
        pieces["experts gate+up (grouped op)"] = lambda: grouped_call(
            (glu.gate_proj, glu.up_proj), xe, inds)
        pieces["SwiGLU between"] = lambda: glu.activation(x_up, x_gate)
        pieces["experts down (grouped op)"] = lambda: glu.down_proj(act, inds)
        pieces["weighted sum of k outputs"] = lambda: (y * scores[..., None]).sum(axis=-2)
    pieces["whole MoE block (one graph; not summed)"] = lambda: moe(h)
    head = model["lm_head"] if "lm_head" in model else inner.embed_tokens.as_linear
    pieces["final norm + head (once)"] = lambda: head(inner.norm(x))

    def step():
        out = model(tokens, cache=cache)
        for c in cache:
            c.offset -= 1  # the context stays at its length
        return out
    pieces["whole decode step (one graph)"] = step
    times = round_robin(pieces, rounds)
    once = ("final norm + head (once)", "whole decode step (one graph)")
    print(f"rows {rows}: ms a decode step (a layer's piece x {layers} layers), "
          f"median of {rounds} rounds: wall, process CPU")
    total = [0.0, 0.0]
    for name, (wall, cpu) in times.items():
        n = 1 if name in once else layers
        if not name.startswith("whole"):
            total = [total[0] + wall * n, total[1] + cpu * n]
        elif name in once:
            print(f"  {'sum of the pieces above':52s} {total[0]:8.3f} {total[1]:8.3f}")
        print(f"  {name:52s} {wall * n:8.3f} {cpu * n:8.3f}")
    # the experts' packed bytes a step reads: each distinct expert the rows chose, per layer
    distinct = len(set(inds.flatten().tolist()))
    experts = glu.gate_proj["weight"].shape[0]
    per_expert = sum(a.nbytes for proj in (glu.gate_proj, glu.up_proj, glu.down_proj)
                     for a in proj._experts_packed) / experts
    read = distinct * per_expert * layers
    ms = sum(times[name][0] for name in times if name.startswith("experts")) * layers
    print(f"  experts: {distinct} distinct of {experts} a layer, "
          f"{read / 2**20:.1f} MiB packed read a step in {ms:.3f} ms = "
          f"{read / ms / 1e6:.1f} GB/s (this machine's copy bandwidth: {bandwidth:.1f} GB/s)")


def main(argv: list[str] | None = None) -> int:
    ensure_preloads()
    p = argparse.ArgumentParser(prog="python -m bench.moe_decode_profile", description=__doc__)
    p.add_argument("--rows", type=int, nargs="+", default=[1, 8])
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--experts", type=int, default=32)
    p.add_argument("--used", type=int, default=4)
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--gguf", type=Path, default=None,
                   help="a qwen3moe GGUF to profile instead of the generated one")
    args = p.parse_args(argv)
    from engine import cpu_kernels
    from engine.loader import load_model
    from engine.model_runner import ModelRunner

    bandwidth = memory_bandwidth_gbs()
    with tempfile.TemporaryDirectory() as folder:
        gguf = args.gguf or write("qwen3moe", args.hidden, args.layers, Path(folder),
                                  args.experts, args.used)
        loaded = load_model(str(gguf))
        runner = ModelRunner(loaded.model)
        args.layers = len(runner.model["model"].layers)
        with cpu_kernels.active(runner.cpu):
            for rows in args.rows:
                profile(runner.model, rows, args.layers, args.rounds, bandwidth)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
