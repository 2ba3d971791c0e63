"""engine.native.cache_attention against MLX's own attention (issue #19), and in the engine.

Error bound, per output element: both sides compute the scores as float32 dot products of
length D in their own order, so each score differs by at most E = 2(D + 2)·u·scale·Σ|q·k|
(u = 2**-24). exp differs by at most 2 ulp (the kernel's polynomial vs MLX's), and each
side sums T weights in its own order: the normalized weights differ relatively by at most
2E + (2T + 8)·u, and the output, a weighted mean of values, by that times 2·max|v|.
Observed errors are ~100x below it; a mask applied wrongly or a wrong head gives O(0.1).
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from engine import SamplingParams, native
from tests.engine.conftest import prompts, reference_tokens, run_to_end

U = 2.0**-24


pytestmark = pytest.mark.usefixtures("native_built")


def _case(b, hq, hkv, length, total, dim, mask, seed):
    """q as mlx-lm makes it (a transposed view), k/v as cache views of a larger buffer."""
    mx.random.seed(seed)
    q = mx.random.normal((b, length, hq, dim)).transpose(0, 2, 1, 3)
    k = mx.random.normal((b, hkv, total + 37, dim))[:, :, :total, :]
    v = mx.random.normal((b, hkv, total + 37, dim))[:, :, :total, :]
    if mask == "bool":  # left padding as in a batch: row i hides its first i keys
        pad = mx.arange(total)[None, :] >= mx.arange(b)[:, None]
        mask = pad[:, None, None, :]
    elif mask == "additive":
        mask = mx.random.normal((b, 1, length, total))
    return q, k, v, mask


def _bound(q, k, v, scale):
    rep = q.shape[1] // k.shape[1]
    kk = np.repeat(np.abs(np.array(k)), rep, axis=1)
    e = 2 * (q.shape[-1] + 2) * U * scale * (np.abs(np.array(q)) @ kk.swapaxes(-1, -2)).max()
    total = k.shape[2]
    return (2 * e + (2 * total + 8) * U) * 2 * np.abs(np.array(v)).max()


@pytest.mark.parametrize("shape", [
    (1, 9, 3, 1, 200, 64),   # solo decode, grouped heads (the bundled model's)
    (1, 9, 3, 18, 740, 64),  # a next turn's chunk over a long history
    (4, 8, 2, 1, 50, 64),    # batched decode
    (2, 4, 4, 5, 5, 32),     # as many queries as keys
    (1, 6, 2, 3, 17, 12),    # head size not a multiple of 8: the portable loop
    (1, 9, 3, 100, 100, 64),  # a whole prompt: tiled, two query blocks, tiles skipped
    (1, 9, 3, 130, 900, 64),  # a prompt chunk over a history: T not a multiple of a tile
    (2, 4, 2, 70, 90, 32),    # batched prompt chunks, D = 32 (the tiled kernel's tail)
], ids=["solo", "next-turn", "batch", "square", "odd-dim", "prompt", "chunk", "prompt-batch"])
@pytest.mark.parametrize("mask", [None, "causal", "bool", "additive"])
@pytest.mark.parametrize("kernel", ["simd", "simd-avx2", "simd-two-pass", "scalar"])
def test_matches_mlx_attention(shape, mask, kernel, monkeypatch) -> None:
    """simd: the default choice (tiled from 16 query positions, its products on AVX-512
    where the CPU has it; else two passes over a row of scores); simd-avx2: the tiled
    kernel's AVX2 products; simd-two-pass: never tiled; scalar: the portable loop."""
    if kernel == "simd-avx2":
        monkeypatch.setenv("BATCHCHAT_NATIVE_AVX512", "0")
    b, hq, hkv, length, total, dim = shape
    q, k, v, m = _case(b, hq, hkv, length, total, dim, mask, seed=sum(shape))
    scale = dim**-0.5
    ref = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=m)
    out = native.cache_attention(q, k, v, scale, m, force_scalar=kernel == "scalar",
                                 tiled_from=0 if kernel == "simd-two-pass" else -1)
    assert out.shape == ref.shape and out.dtype == mx.float32
    err = np.abs(np.array(out) - np.array(ref)).max()
    assert err <= _bound(q, k, v, scale), err


def test_a_row_with_every_key_masked_gives_zeros() -> None:
    q, k, v, _ = _case(1, 4, 2, 2, 9, 16, None, seed=5)
    mask = mx.array([[True] * 9, [False] * 9])[None, None]
    out = np.array(native.cache_attention(q, k, v, 0.25, mask))
    assert np.all(out[:, :, 1] == 0) and np.all(np.isfinite(out))
    ref = mx.fast.scaled_dot_product_attention(q[:, :, :1], k, v, scale=0.25)
    assert np.allclose(out[:, :, :1], np.array(ref), atol=1e-6)


def test_bad_arguments_are_refused() -> None:
    q, k, v, _ = _case(1, 4, 3, 1, 8, 16, None, seed=6)
    with pytest.raises(ValueError, match="multiple"):
        native.cache_attention(q, k, v, 0.25)  # 4 query heads over 3 key heads
    q, k, v, _ = _case(1, 4, 2, 1, 8, 16, None, seed=6)
    with pytest.raises(ValueError, match="mask"):
        native.cache_attention(q, k, v, 0.25, "sliding")


def test_the_engine_routes_small_passes_to_it_and_stays_exact(tiny, make_engine,
                                                              monkeypatch) -> None:
    """Decode steps and prompt chunks of any length run the kernel; greedy tokens equal
    mlx-lm's own generation (solo, a batch with left padding, a next turn over a restored
    prefix, a prompt long enough for chunks the tiled kernel takes)."""
    calls: list[int] = []
    real = native.cache_attention
    monkeypatch.setattr(native, "cache_attention",
                        lambda q, *a, **kw: calls.append(q.shape[2]) or real(q, *a, **kw))
    engine = make_engine(max_concurrent=4)
    batch = prompts(4, seed=41)
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=12))
               for p in batch]
    run_to_end(engine)
    assert [s.tokens for s in streams] == [reference_tokens(tiny.model, p, 12) for p in batch]
    turn = batch[3] + streams[3].tokens + [9, 8, 7]
    nxt = engine.submit(prompt_tokens=turn, params=SamplingParams(max_tokens=12))
    run_to_end(engine)
    assert nxt.stats.cached_tokens > 0
    assert nxt.tokens == reference_tokens(tiny.model, turn, 12)
    assert 1 in calls and any(n > 1 for n in calls)  # decode steps and prompt chunks
    long_prompt = [(i * 37) % 256 for i in range(300)]
    calls.clear()
    solo = engine.submit(prompt_tokens=long_prompt, params=SamplingParams(max_tokens=12))
    run_to_end(engine)
    assert solo.tokens == reference_tokens(tiny.model, long_prompt, 12)
    assert max(calls) > 64  # chunks past the old two-pass limit go to the kernel too


def test_the_switch_turns_it_off(tiny, make_engine, monkeypatch) -> None:
    monkeypatch.setenv("BATCHCHAT_NATIVE_ATTENTION", "0")  # read when the config is made
    monkeypatch.setattr(native, "cache_attention",
                        lambda *a, **kw: pytest.fail("kernel used although switched off"))
    engine = make_engine()
    stream = engine.submit(prompt_tokens=prompts(1, seed=42)[0],
                           params=SamplingParams(max_tokens=4))
    run_to_end(engine)
    assert len(stream.tokens) == 4
