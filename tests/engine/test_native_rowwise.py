"""The native row-wise ops (RoPE, RMSNorm, SiLU x up) against MLX's own, and through the engine.

Error bounds, u = 2**-24:
- RoPE: both sides compute the same float32 angle; each output is x1*cos - x2*sin (or the
  other pair) with cos/sin within one ulp of the true value on each side, plus three
  roundings: |diff| <= 8u(|x1| + |x2|).
- RMSNorm: the sum of squares is summed in another order (relative error <= n·u on each
  side), then a square root and two products: |diff| <= (n + 8)·u·|y|.
- SiLU x up: measured against float64: MLX's own swiglu is up to ~16 ulp off it (its
  sigmoid for large negative gates), the AVX2 path (engine/cpu_kernels' exp polynomial)
  ~16 ulp, the portable one (libm exp) ~3; bound 32u·|y| against both float64 and MLX.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.activations import swiglu as stock_swiglu

from engine import cpu_kernels, cpu_layers, module_tree, native
from engine.cpu_options import CpuOptions
from tests.engine.conftest import STAGGERED_LENGTHS, prompts, reference_tokens, run_staggered

U = 2.0**-24


pytestmark = pytest.mark.usefixtures("native_built")


def _rope_bound(x: mx.array, dims: int, traditional: bool) -> np.ndarray:
    a = np.abs(np.array(x))
    half = dims // 2
    i1 = np.arange(0, dims, 2) if traditional else np.arange(half)
    i2 = i1 + 1 if traditional else i1 + half
    pair = a[..., i1] + a[..., i2]
    bound = np.zeros_like(a)
    bound[..., i1] = bound[..., i2] = 8 * U * pair
    return bound  # features past dims are copied: bound 0


@pytest.mark.parametrize("traditional", [True, False])
@pytest.mark.parametrize("shape,dims", [((2, 9, 5, 64), 64), ((1, 3, 1, 64), 64),
                                        ((3, 7, 32), 32), ((2, 4, 6, 80), 64),
                                        ((2, 3, 4, 5, 64), 32)])
@pytest.mark.parametrize("offset", ["zero", "int", "late", "per_row"])
def test_rope_matches_mlx_fast_rope(traditional, shape, dims, offset):
    mx.random.seed(hash((traditional, shape, offset)) % 1000)
    x = mx.random.normal(shape)
    off = {"zero": 0, "int": 200, "late": 8000,
           "per_row": mx.array([3, 8191, 17][:shape[0]], dtype=mx.int32)}[offset]
    for base, scale in ((10000.0, 1.0), (500000.0, 0.25)):
        want = mx.fast.rope(x, dims, traditional=traditional, base=base, scale=scale, offset=off)
        got = native.rope(x, dims, traditional=traditional, scale=scale, offset=off,
                          inv_freq=native.rope_inv_freq(dims, base))
        assert got.shape == want.shape and got.dtype == mx.float32
        err = np.abs(np.array(got) - np.array(want))
        assert np.all(err <= _rope_bound(x, dims, traditional)), err.max()


def test_rope_reads_transposed_views_and_takes_freqs():
    x = mx.random.normal((2, 5, 9, 64)).transpose(0, 2, 1, 3)  # (B, heads, T, D) view
    freqs = mx.linspace(1.0, 300.0, 32)
    want = mx.fast.rope(x, 64, traditional=False, base=None, scale=1.0, offset=mx.array([4, 9]),
                        freqs=freqs)
    got = native.rope(x, 64, traditional=False, scale=1.0, offset=mx.array([4, 9]),
                      inv_freq=native.rope_inv_freq(64, None, freqs))
    assert np.all(np.abs(np.array(got) - np.array(want)) <= _rope_bound(x, 64, False))


@pytest.mark.parametrize("scalar", [False, True], ids=["simd", "scalar"])
@pytest.mark.parametrize("shape", [(1, 1, 576), (4, 7, 576), (300, 64), (3, 13)])
def test_rms_norm_matches_mlx_fast_rms_norm(scalar, shape):
    mx.random.seed(shape[-1])
    x = mx.random.normal(shape) * 3
    n = shape[-1]
    for w in (mx.random.normal((n,)), None):
        want = np.array(mx.fast.rms_norm(x, w, 1e-5))
        got = np.array(native.rms_norm(x, w, 1e-5, force_scalar=scalar))
        assert np.all(np.abs(got - want) <= (n + 8) * U * np.abs(want) + 1e-30)
    zeros = native.rms_norm(mx.zeros((2, n)), None, 1e-5, force_scalar=scalar)
    assert np.array_equal(np.array(zeros), np.zeros((2, n)))  # eps keeps it finite


@pytest.mark.parametrize("scalar", [False, True], ids=["simd", "scalar"])
def test_silu_mul_matches_swiglu(scalar):
    mx.random.seed(3)
    gate, up = mx.random.normal((3, 5, 1537)) * 6, mx.random.normal((3, 5, 1537))
    want = np.array(stock_swiglu(gate, up))
    got = np.array(native.silu_mul(gate, up, force_scalar=scalar))
    g64, u64 = np.array(gate).astype(np.float64), np.array(up).astype(np.float64)
    exact = g64 * u64 / (1 + np.exp(-g64))
    assert np.all(np.abs(got - exact) <= 32 * U * np.abs(exact) + 1e-37)
    assert np.all(np.abs(got - want) <= 32 * U * np.abs(want) + 1e-37)
    edge = mx.array([-1e4, -200.0, -90.0, 90.0, 200.0, 1e4] * 3)
    ones = mx.ones_like(edge)
    assert np.array_equal(np.array(native.silu_mul(edge, ones, force_scalar=scalar)),
                          np.array(stock_swiglu(edge, ones)))


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        native.rope(mx.zeros((2, 4, 64)), 63, traditional=True, scale=1.0, offset=0,
                    inv_freq=native.rope_inv_freq(64, 1e4))
    with pytest.raises(ValueError):
        native.rope(mx.zeros((2, 1, 4, 64)), 64, traditional=True, scale=1.0,
                    offset=mx.array([1, 2, 3]), inv_freq=native.rope_inv_freq(64, 1e4))
    with pytest.raises(ValueError):
        native.rms_norm(mx.zeros((2, 8)), mx.ones((9,)), 1e-5)
    with pytest.raises(ValueError):
        native.silu_mul(mx.zeros((2, 8)), mx.zeros((2, 9)))


def _count_native(monkeypatch) -> list[str]:
    calls: list[str] = []
    for name in ("rope", "rms_norm", "silu_mul"):
        real = getattr(native, name)
        monkeypatch.setattr(native, name, lambda *a, _real=real, _name=name, **k:
                            calls.append(_name) or _real(*a, **k))
    return calls


def test_only_the_engines_passes_use_them(tiny, monkeypatch):
    calls = _count_native(monkeypatch)
    tree = module_tree.clone(tiny.model)  # the engine's own modules
    cpu_layers.install(tree)
    x = mx.array([[1, 2, 3]])
    plain = tree(x)  # not inside active(): MLX's own ops, bit for bit
    assert not calls
    assert mx.array_equal(plain, tiny.model(x)).item()
    with cpu_kernels.active():
        fast = tree(x)
        seen = len(calls)
        tiny.model(x)  # the loaded model itself: never the engine's ops
        assert len(calls) == seen
    assert {"rope", "rms_norm", "silu_mul"} <= set(calls)
    assert mx.allclose(plain, fast, rtol=1e-4, atol=1e-4).item()
    seen = len(calls)
    with cpu_kernels.active(CpuOptions(rowwise=False)):  # BATCHCHAT_NATIVE_ROWWISE=0
        tree(x)
    assert len(calls) == seen


def test_engine_tokens_with_native_rowwise_equal_mlx_lm_generate(tiny, make_engine,
                                                                monkeypatch):
    calls = _count_native(monkeypatch)
    engine = make_engine(max_concurrent=6, prefill_burst=8)
    ps = prompts(8, seed=9)
    streams = run_staggered(engine, ps)
    assert {"rope", "rms_norm", "silu_mul"} <= set(calls)  # solo, batched and prefill passes
    seen = len(calls)
    for p, n, s in zip(ps, STAGGERED_LENGTHS, streams, strict=True):  # reference: MLX's ops
        assert s.tokens == reference_tokens(tiny.model, p, n), s.request_id
    assert len(calls) == seen
