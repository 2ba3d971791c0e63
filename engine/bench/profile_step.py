"""`python -m engine.bench.profile_step [--rows 32] [--context 200]`: where a batched decode
step's time goes, piece by piece (each piece evaluated on its own, medians of 20 runs)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import mlx.core as mx
from mlx_lm.models.base import create_attention_mask, scaled_dot_product_attention
from mlx_lm.models.cache import BatchKVCache

from ..blas import ensure_fast_blas


def median_ms(fn: Callable[[], None], n: int = 20) -> float:
    fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[n // 2] * 1e3


def profile(model, rows: int, context: int) -> dict[str, float]:
    inner = model.model
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
    h = mx.random.normal((rows, 1, inner.embed_tokens.weight.shape[1]))
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
        "  SDPA": median_ms(lambda: mx.eval(scaled_dot_product_attention(
            q, keys, values, c0, scale=attn.scale, mask=mask))),
    }


def main(argv: list[str] | None = None) -> int:
    ensure_fast_blas()
    p = argparse.ArgumentParser(prog="python -m engine.bench.profile_step", description=__doc__)
    p.add_argument("--model", default="bundled")
    p.add_argument("--rows", type=int, default=32)
    p.add_argument("--context", type=int, default=200)
    args = p.parse_args(argv)
    from ..loader import load_model

    model = load_model(args.model).model
    print(f"decode step, {args.rows} rows, {args.context} tokens of context, "
          f"{len(model.model.layers)} layers")
    for name, ms in profile(model, args.rows, args.context).items():
        print(f"{name:<28} {ms:8.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
