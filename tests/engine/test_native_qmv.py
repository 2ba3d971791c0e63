"""engine.native.quantized_matvec against MLX's own quantized matmul (issue #19).

Error bound, per output element: the kernel and MLX both compute a float32 dot product of
length K over dequantized weights, each in its own order (AVX2 lanes vs sequential). Each
result is within (K + 2)·u·A of the exact value, u = 2**-24 and A = Σ_k |x_k|(|s|·q_k + |b|)
(the usual γ_K bound for a sum in any order, plus one rounding for s·q + b; using |s|q + |b|
instead of |w| also covers implementations that sum s·Σqx + b·Σx separately). So they differ by
at most 2(K + 2)·u·A. Observed errors are ~100x smaller; a wrongly unpacked value would exceed it.
"""

from __future__ import annotations

import logging

import mlx.core as mx
import numpy as np
import pytest

from engine import native

U = 2.0**-24


pytestmark = pytest.mark.usefixtures("native_built")


def _case(m: int, n: int, k: int, bits: int, gs: int, seed: int, wdtype=mx.float32):
    mx.random.seed(seed)
    w = (mx.random.normal((n, k)) * 0.05).astype(wdtype)
    x = mx.random.normal((m, k))
    q, s, b = mx.quantize(w, group_size=gs, bits=bits)
    return x, q, s, b


def _reference_and_bound(x, q, s, b, gs, bits):
    s32, b32 = s.astype(mx.float32), b.astype(mx.float32)
    ref = mx.quantized_matmul(x, q, s32, b32, transpose=True, group_size=gs, bits=bits)
    qv = mx.dequantize(q, mx.ones_like(s32), mx.zeros_like(b32), group_size=gs, bits=bits)
    rep = lambda a: mx.repeat(mx.abs(a), gs, axis=-1)  # noqa: E731
    a = mx.abs(x) @ (rep(s32) * qv + rep(b32)).T
    k = x.shape[-1]
    return np.array(ref), 2 * (k + 2) * U * np.array(a)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("gs", [32, 64])
@pytest.mark.parametrize("m", [1, 3, 8, 32])
@pytest.mark.parametrize("n", [197, 1031])
@pytest.mark.parametrize("scalar", [False, True], ids=["simd", "scalar"])
def test_matches_mlx_quantized_matmul(bits: int, gs: int, m: int, n: int, scalar: bool) -> None:
    x, q, s, b = _case(m, n, 576, bits, gs, seed=bits * 1000 + gs * 10 + m)
    y = native.quantized_matvec(x, q, s, b, gs, bits, force_scalar=scalar)
    ref, bound = _reference_and_bound(x, q, s, b, gs, bits)
    assert y.shape == (m, n) and y.dtype == mx.float32
    err = np.abs(np.array(y) - ref)
    assert np.all(err <= bound), f"max err {err.max()} vs bound {bound[err > bound].min()}"


@pytest.mark.parametrize("wdtype", [mx.float16, mx.bfloat16])
@pytest.mark.parametrize("scalar", [False, True], ids=["simd", "scalar"])
def test_half_precision_scales(wdtype, scalar: bool) -> None:
    x, q, s, b = _case(5, 130, 1536, 4, 32, seed=7, wdtype=wdtype)
    assert s.dtype == wdtype
    y = native.quantized_matvec(x, q, s, b, 32, 4, force_scalar=scalar)
    ref, bound = _reference_and_bound(x, q, s, b, 32, 4)
    assert np.all(np.abs(np.array(y) - ref) <= bound)


def test_simd_and_scalar_agree_and_threads_do_not_change_results() -> None:
    x, q, s, b = _case(4, 4099, 576, 8, 64, seed=3)
    ys = np.array(native.quantized_matvec(x, q, s, b, 64, 8, force_scalar=True))
    native.set_threads(1)
    try:
        one = np.array(native.quantized_matvec(x, q, s, b, 64, 8))
    finally:
        native.set_threads(2)
    two = np.array(native.quantized_matvec(x, q, s, b, 64, 8))
    assert np.array_equal(one, two)  # each output is computed by one thread, same order
    _, bound = _reference_and_bound(x, q, s, b, 64, 8)
    assert np.all(np.abs(one - ys) <= bound)


def test_leading_dims_strided_input_and_dtype() -> None:
    x, q, s, b = _case(6, 64, 128, 4, 64, seed=5)
    ref, bound = _reference_and_bound(x, q, s, b, 64, 4)
    x3 = x.reshape(2, 3, 128)
    y3 = native.quantized_matvec(x3, q, s, b, 64, 4)
    assert y3.shape == (2, 3, 64)
    assert np.all(np.abs(np.array(y3).reshape(6, 64) - ref) <= bound)
    xt = mx.array(np.ascontiguousarray(np.array(x).T)).T  # same values, column-major view
    assert np.all(np.abs(np.array(native.quantized_matvec(xt, q, s, b, 64, 4)) - ref) <= bound)
    y16 = native.quantized_matvec(x.astype(mx.float16), q, s, b, 64, 4)
    assert y16.dtype == mx.float16


def test_inside_a_larger_graph() -> None:
    x, q, s, b = _case(2, 96, 256, 4, 32, seed=11)
    y = native.quantized_matvec(mx.tanh(x) * 2, q, s, b, 32, 4) + 1
    ref = mx.quantized_matmul(mx.tanh(x) * 2, q, s, b, transpose=True, group_size=32, bits=4) + 1
    assert np.allclose(np.array(y), np.array(ref), atol=1e-4)


@pytest.mark.parametrize("bad", ["bits", "group", "k", "scales"])
def test_rejects_bad_arguments(bad: str) -> None:
    x, q, s, b = _case(1, 64, 128, 4, 32, seed=1)
    args = dict(x=x, w=q, scales=s, biases=b, group_size=32, bits=4)
    if bad == "bits":
        args["bits"] = 3
    elif bad == "group":
        args["group_size"] = 128
    elif bad == "k":
        args["x"] = mx.zeros((1, 96))
    else:
        args["scales"] = s[:, :1]
    with pytest.raises(ValueError):
        native.quantized_matvec(**args)


def test_unavailable_warns_once(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    native.reset()
    try:
        with monkeypatch.context() as m:
            m.setattr(native, "_device_reason", lambda: "off for this test")
            with caplog.at_level(logging.WARNING, logger="engine.native"):
                assert not native.available()
                assert not native.available()
        warnings = [r for r in caplog.records if "native CPU kernels not used" in r.message]
        assert len(warnings) == 1 and "off for this test" in warnings[0].getMessage()
    finally:
        native.reset()
    assert native.available()


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("gs", [32, 64])
@pytest.mark.parametrize("wdtype", [mx.float32, mx.float16, mx.bfloat16])
@pytest.mark.parametrize("scalar", [False, True], ids=["simd", "scalar"])
def test_dequantize_f32_equals_mlx_dequantize(bits: int, gs: int, wdtype, scalar: bool) -> None:
    """Each side rounds s*q + b once (FMA) or twice: apart by at most 2u(|s|q + |b|)."""
    _, q, s, b = _case(1, 1030, 576, bits, gs, seed=bits + gs, wdtype=wdtype)
    w = native.dequantize_f32(q, s, b, gs, bits, force_scalar=scalar)
    ref = mx.dequantize(q, s.astype(mx.float32), b.astype(mx.float32), group_size=gs, bits=bits)
    assert w.dtype == mx.float32 and w.shape == ref.shape
    s32, b32 = s.astype(mx.float32), b.astype(mx.float32)
    qv = mx.dequantize(q, mx.ones_like(s32), mx.zeros_like(b32), group_size=gs, bits=bits)
    mag = mx.repeat(mx.abs(s32), gs, axis=-1) * qv + mx.repeat(mx.abs(b32), gs, axis=-1)
    assert np.all(np.abs(np.array(w) - np.array(ref)) <= 2 * U * np.array(mag))


def _int8_bound(x, q, s, b, gs, bits):
    """Bound for int8_x: x is rounded per 32-block to a multiple of step = max|x| / 127, so
    each rounded value is within step / 2 of x and the result differs from the exact one by
    at most Σ_k |w_k|·step_k / 2, plus the float32 rounding bound of both sides (taken with
    |x| + step / 2, the largest a rounded value can be)."""
    ref, _ = _reference_and_bound(x, q, s, b, gs, bits)
    xn = np.array(x).reshape(x.shape[0], -1, 32)
    step = np.repeat(np.abs(xn).max(-1) / 127.0, 32, axis=-1)
    w = np.array(mx.dequantize(q, s.astype(mx.float32), b.astype(mx.float32), group_size=gs,
                               bits=bits))
    _, rounding = _reference_and_bound(mx.abs(x) + mx.array(step / 2), q, s, b, gs, bits)
    return ref, 0.5 * step @ np.abs(w).T + 2 * rounding


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("gs", [32, 64])
@pytest.mark.parametrize("m", [1, 3, 8, 33])
@pytest.mark.parametrize("scalar", [False, True], ids=["simd", "scalar"])
@pytest.mark.parametrize("wdtype", [mx.float16, mx.bfloat16, mx.float32])
def test_int8_activations_within_their_rounding_bound(bits: int, gs: int, m: int,
                                                      scalar: bool, wdtype) -> None:
    x, q, s, b = _case(m, 197, 576, bits, gs, seed=bits * 100 + gs + m, wdtype=wdtype)
    assert s.dtype == wdtype  # each scale type read in place
    y = np.array(native.quantized_matvec(x, q, s, b, gs, bits, int8_x=True,
                                         force_scalar=scalar))
    ref, bound = _int8_bound(x, q, s, b, gs, bits)
    err = np.abs(y - ref)
    assert np.all(err <= bound), f"max err {err.max()} vs bound {bound[err > bound].min()}"
    # It is rounding, not an unpacking mistake: typical errors are far below the worst case
    # and far above float32 rounding (so the int8 path really ran).
    assert 1e-4 < float(np.median(err / bound)) < 0.2


def test_int8_simd_equals_scalar_up_to_float_order() -> None:
    """Both sides sum the same exact integer dot products per block; only the float order of
    scaling and summing the blocks differs."""
    x, q, s, b = _case(5, 1031, 1536, 4, 32, seed=21)
    simd = np.array(native.quantized_matvec(x, q, s, b, 32, 4, int8_x=True))
    scalar = np.array(native.quantized_matvec(x, q, s, b, 32, 4, int8_x=True,
                                              force_scalar=True))
    assert np.allclose(simd, scalar, rtol=1e-5, atol=1e-5)
    zeros = np.array(native.quantized_matvec(mx.zeros((2, 1536)), q, s, b, 32, 4, int8_x=True))
    assert np.array_equal(zeros, np.zeros_like(zeros))  # an all-zero block has step 0


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":")[1].split()) for line in f
                         if line.startswith("flags")), set())
    except OSError:
        return set()


@pytest.mark.parametrize(("bits", "gs", "k", "wdtype"), [
    (4, 32, 576, mx.float16), (4, 32, 96, mx.float32), (4, 64, 128, mx.bfloat16),
    (8, 32, 160, mx.float16), (8, 64, 192, mx.float32)])
def test_int8_rows_are_batch_invariant_and_avx512_equals_avx2(
        bits: int, gs: int, k: int, wdtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #25: a row's output is bitwise the same alone or among 1..100 rows (every tile
    size and an odd number of 32-blocks: k = 96, 160), and BATCHCHAT_NATIVE_AVX512=0 does
    not change it (this kernel runs AVX2 either way; the engine's default, the packed
    kernel, has an AVX-512 path: test_native_packed.py compares the two)."""
    x, q, s, b = _case(100, 72, k, bits, gs, seed=k + bits, wdtype=wdtype)
    run = lambda rows: np.array(native.quantized_matvec(  # noqa: E731
        rows, q, s, b, gs, bits, int8_x=True))
    full = run(x)
    for m in (1, 2, 3, 5, 8, 13, 64, 99):
        part = run(x[100 - m:])
        assert np.array_equal(part, full[100 - m:]), f"rows {100 - m}.. alone differ ({m})"
    if not {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"} <= _cpu_flags():
        pytest.skip("no AVX-512 VNNI on this CPU: only the AVX2 kernel runs here")
    monkeypatch.setenv("BATCHCHAT_NATIVE_AVX512", "0")
    assert np.array_equal(run(x), full)
