"""`python -m bench.profile_step [--rows 32] [--context 200] [--prefill N] [--kernels]`:
where a batched decode step's (or, with `--prefill N`, a prefill pass's of `rows` prompts of
N tokens) time goes, piece by piece; each piece evaluated on its own, medians of repeated
runs. `--kernels` profiles the engine's own passes (its CPU kernels and malloc tuning)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from contextlib import nullcontext

import mlx.core as mx
from mlx_lm.models.base import create_attention_mask
from mlx_lm.models.cache import BatchKVCache

from engine import cpu_kernels
from engine.preload import ensure_preloads


def median_ms(fn: Callable[[], None], n: int = 20) -> float:
    fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[n // 2] * 1e3


def _module_ops(model) -> tuple[Callable[..., mx.array], Callable[..., mx.array]]:
    """The attention and SiLU as the model's layers call them: the names their `__call__`
    reads (the engine's dispatchers in the engine's own modules, engine/cpu_kernels.py)."""
    layer = model.model.layers[0]
    attn = type(layer.self_attn).__call__.__globals__
    mlp = type(layer.mlp).__call__.__globals__
    return attn["scaled_dot_product_attention"], mlp["swiglu"]


def profile(model, rows: int, context: int) -> dict[str, float]:
    inner = model.model
    sdpa, _ = _module_ops(model)
    cache = [BatchKVCache([0] * rows) for _ in inner.layers]
    model(mx.random.randint(0, 1000, (rows, context)), cache=cache)
    mx.eval([c.state for c in cache])
    x = mx.random.randint(0, 1000, (rows, 1))

    def forward(fn: Callable[..., mx.array]) -> Callable[[], None]:
        def run() -> None:
            mx.eval(fn(x, cache=cache))
            for c in cache:
                c.trim(1)  # keep the context length fixed across runs
        return run

    layer, c0 = inner.layers[0], cache[0]
    attn = layer.self_attn
    h = mx.random.normal((rows, 1, model.args.hidden_size))
    hidden = inner(x, cache=cache)
    for c in cache:
        c.trim(1)
    mask = create_attention_mask(h, c0)
    q = mx.random.normal((rows, attn.n_heads, 1, h.shape[-1] // attn.n_heads))
    kv = mx.random.normal((rows, attn.n_kv_heads, 1, q.shape[-1]))
    keys, values = c0.update_and_fetch(kv, kv)
    mx.eval(h, hidden, q, keys, values)
    c0.trim(1)
    return {
        "step (model call)": median_ms(forward(model)),
        "step without lm_head": median_ms(forward(inner)),
        "lm_head": median_ms(lambda: mx.eval(inner.embed_tokens.as_linear(hidden))
                             if model.args.tie_word_embeddings else mx.eval(model.lm_head(hidden))),
        "one MLP block": median_ms(lambda: mx.eval(layer.mlp(layer.post_attention_layernorm(h)))),
        "one attention block": median_ms(lambda: (mx.eval(attn(layer.input_layernorm(h), mask,
                                                                c0)), c0.trim(1))),
        "  q/k/v/o projections": median_ms(lambda: mx.eval(
            attn.q_proj(h), attn.k_proj(h), attn.v_proj(h), attn.o_proj(h))),
        "  RoPE (per-row offsets)": median_ms(lambda: mx.eval(attn.rope(q, offset=c0.offset))),
        "  SDPA": median_ms(lambda: mx.eval(sdpa(q, keys, values, c0, scale=attn.scale,
                                                 mask=mask))),
    }


def profile_prefill(model, rows: int, tokens: int) -> dict[str, float]:
    """One prefill pass of `rows` fresh prompts of `tokens` tokens (a burst sharing a pass)."""
    inner = model.model
    sdpa, swiglu = _module_ops(model)
    x = mx.random.randint(0, 1000, (rows, tokens))

    def full_pass() -> None:
        cache = [BatchKVCache([0] * rows) for _ in inner.layers]
        inner(x, cache=cache)  # prefill never needs logits
        mx.eval([c.state for c in cache])

    layer = inner.layers[0]
    attn, mlp = layer.self_attn, layer.mlp
    dim = model.args.hidden_size
    head_dim = dim // attn.n_heads
    h = mx.random.normal((rows, tokens, dim))
    q = mx.random.normal((rows, attn.n_heads, tokens, head_dim))
    k = mx.random.normal((rows, attn.n_kv_heads, tokens, head_dim))
    gate = mx.random.normal((rows, tokens, mlp.gate_proj.weight.shape[0]))
    mask = create_attention_mask(h, BatchKVCache([0] * rows))
    mx.eval(h, q, k, gate)
    n = 5
    return {
        "whole pass (no lm_head)": median_ms(full_pass, n),
        "one layer": median_ms(lambda: mx.eval(layer(h, mask, BatchKVCache([0] * rows))), n),
        "  RMSNorm": median_ms(lambda: mx.eval(layer.input_layernorm(h)), n),
        "  q/k/v projections": median_ms(
            lambda: mx.eval(attn.q_proj(h), attn.k_proj(h), attn.v_proj(h)), n),
        "  RoPE on q and k": median_ms(lambda: mx.eval(attn.rope(q), attn.rope(k)), n),
        "  SDPA": median_ms(lambda: mx.eval(sdpa(q, k, k, None, scale=attn.scale,
                                                 mask=mask)), n),
        "  o projection": median_ms(lambda: mx.eval(attn.o_proj(h)), n),
        "  gate/up projections": median_ms(lambda: mx.eval(mlp.gate_proj(h), mlp.up_proj(h)), n),
        "  SiLU x up": median_ms(lambda: mx.eval(swiglu(gate, gate)), n),
        "  down projection": median_ms(lambda: mx.eval(mlp.down_proj(gate)), n),
    }


def main(argv: list[str] | None = None) -> int:
    ensure_preloads()
    p = argparse.ArgumentParser(prog="python -m bench.profile_step", description=__doc__)
    p.add_argument("--model", default="bundled")
    p.add_argument("--rows", type=int, default=32)
    p.add_argument("--context", type=int, default=200)
    p.add_argument("--prefill", type=int, default=0, metavar="TOKENS",
                   help="profile a prefill pass of --rows prompts of this many tokens")
    p.add_argument("--kernels", action="store_true",
                   help="with the engine's CPU kernels and malloc tuning")
    args = p.parse_args(argv)
    from engine.loader import load_model

    model = load_model(args.model).model
    scope = nullcontext()
    if args.kernels:  # everything the engine installs: CPU kernels, native linears, malloc
        from engine.model_runner import ModelRunner

        runner = ModelRunner(model)  # its own modules, with the kernels
        model = runner.model
        if runner.fast_cpu_kernels:
            scope = cpu_kernels.active(runner.cpu)
    with scope:
        if args.prefill:
            print(f"prefill pass, {args.rows} prompts x {args.prefill} tokens, "
                  f"{len(model.model.layers)} layers, kernels {'on' if args.kernels else 'off'}")
            results = profile_prefill(model, args.rows, args.prefill)
        else:
            print(f"decode step, {args.rows} rows, {args.context} tokens of context, "
                  f"{len(model.model.layers)} layers, kernels {'on' if args.kernels else 'off'}")
            results = profile(model, args.rows, args.context)
    for name, ms in results.items():
        print(f"{name:<28} {ms:8.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
