"""Every sampled row of a step drawn in one graph of MLX ops, for GPUs (Metal, CUDA).

The same contract as engine.native.sample_tokens, which the CPU uses: mlx-lm's filters
(top-p, then min-p, then top-k, on the untempered distribution), then the token where the
kept tokens' cumulative probability at the row's temperature, in token-id order, first
exceeds u times their total. A GPU sorts the vocabulary fast; what it pays for is ops, and
mlx-lm's sampler a row at a time is ~15 ops a row a step (at 32 rows on an H100 the engine's
step took 29 ms against BatchGenerator's 20 ms, whose one sampler serves the whole batch).
Here the batch costs the same ~20 ops at any row count. The draw is the row's own uniform
(its seed and step), so a seeded request draws the same token in any batch.
"""

from __future__ import annotations

import mlx.core as mx


def sample_tokens(logits: mx.array, u: mx.array, params: mx.array) -> mx.array:
    """logits (B, V) float32, u (B,) in [0, 1), params (B, 4): temperature (> 0), top_p (0 or
    1: off), min_p, top_k (0: off). Returns (B,) int32 token ids; a row whose logits are all
    -inf gives token 0."""
    _, v = logits.shape
    temp, top_p, min_p, top_k = (params[:, i : i + 1] for i in range(4))
    top = mx.max(logits, axis=-1, keepdims=True)
    order = mx.argsort(-logits, axis=-1)  # descending
    ranked = mx.take_along_axis(logits, order, axis=-1)
    mass = mx.exp(ranked - top)
    above = mx.cumsum(mass, axis=-1) - mass  # the mass ranked above each token
    nucleus = (top_p > 0) & (top_p < 1)
    in_nucleus = mx.where(nucleus, above < top_p * mx.sum(mass, axis=-1, keepdims=True), True)
    # mlx-lm's top-p cut is a value: every token at the smallest kept value stays
    cut = mx.min(mx.where(in_nucleus, ranked, mx.inf), axis=-1, keepdims=True)
    floor = mx.where(min_p > 0, top + mx.log(mx.maximum(min_p, 1e-30)), -mx.inf)
    rank = mx.arange(v, dtype=mx.float32)[None]
    # every filter keeps a prefix of the descending order, so top-k is a rank limit
    keep = (ranked >= cut) & (ranked >= floor) & (ranked > -mx.inf) & (
        (top_k <= 0) | (rank < top_k))
    kept = mx.put_along_axis(mx.zeros(logits.shape, dtype=mx.bool_), order, keep, axis=-1)
    weight = mx.where(kept, mx.exp((logits - top) / temp), 0.0)
    running = mx.cumsum(weight, axis=-1)
    pick = mx.sum(running <= u[:, None] * running[:, -1:], axis=-1)
    # u * total rounding past the sum: the last kept token
    last = mx.max(mx.where(kept, mx.arange(v)[None], -1), axis=-1)
    pick = mx.minimum(pick, last)
    return mx.where(mx.isfinite(top[:, 0]), pick, 0).astype(mx.int32)
