"""engine.native's packed int8 kernel (src/packed.h), the engine's quantized linears for
every row count since issue #25: within the int8 rounding bound of MLX's exact product,
and bitwise the same for a row alone or in any batch, on the AVX-512 VNNI, AVX2 and
portable paths alike."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from engine import native
from tests.engine.test_native_qmv import _case, _cpu_flags, _int8_bound

pytestmark = pytest.mark.usefixtures("native_built")

VNNI = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"}


def _run(x, packed, n, gs, bits, scalar=False):
    return np.array(native.packed_matvec_many(x, [packed], [n], gs, bits,
                                              force_scalar=scalar)[0])


@pytest.mark.parametrize(("bits", "gs", "k", "n", "wdtype"), [
    (4, 32, 576, 197, mx.float16), (4, 64, 128, 40, mx.bfloat16), (8, 32, 160, 33, mx.float32),
    (8, 64, 192, 16, mx.float16), (4, 32, 96, 5, mx.float32)])
@pytest.mark.parametrize("scalar", [False, True], ids=["simd", "portable"])
def test_within_the_int8_rounding_bound(bits, gs, k, n, wdtype, scalar) -> None:
    x, q, s, b = _case(9, n, k, bits, gs, seed=k + n + bits, wdtype=wdtype)
    y = _run(x, native.pack_quantized(q, s, b, gs, bits), n, gs, bits, scalar)
    ref, bound = _int8_bound(x, q, s, b, gs, bits)
    err = np.abs(y - ref)
    assert y.shape == (9, n) and np.all(err <= bound), f"max err {err.max()}"
    assert 1e-4 < float(np.median(err / bound)) < 0.2  # int8 rounding, not float32's


@pytest.mark.parametrize(("bits", "gs", "k", "n"), [(4, 32, 576, 200), (8, 32, 160, 37),
                                                     (4, 64, 192, 21), (8, 64, 128, 16)])
def test_rows_alone_equal_their_rows_in_any_batch_on_every_path(
        bits, gs, k, n, monkeypatch: pytest.MonkeyPatch) -> None:
    x, q, s, b = _case(100, n, k, bits, gs, seed=n + k)
    packed = native.pack_quantized(q, s, b, gs, bits)
    full = _run(x, packed, n, gs, bits)
    for m in (1, 2, 3, 5, 8, 13, 64, 99):
        assert np.array_equal(_run(x[100 - m:], packed, n, gs, bits), full[100 - m:]), m
    assert np.array_equal(_run(x, packed, n, gs, bits, scalar=True), full)  # portable
    monkeypatch.setenv("BATCHCHAT_NATIVE_AVX512", "0")
    assert native.extension().packed_kernel() in ("avx2", "portable")
    assert np.array_equal(_run(x, packed, n, gs, bits), full)  # AVX2
    if not VNNI <= _cpu_flags():
        pytest.skip("no AVX-512 VNNI here: the AVX-512 path was not compared")
    monkeypatch.setenv("BATCHCHAT_NATIVE_AVX512", "1")
    assert native.extension().packed_kernel() == "avx512-vnni"


@pytest.mark.parametrize(("bits", "gs", "k", "n"), [(4, 32, 4096, 40), (8, 64, 2048, 21)])
def test_a_prompt_chunk_in_row_blocks_equals_its_rows_alone_on_every_path(
        bits, gs, k, n, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ~256 KiB of int8 rows the kernel runs a chunk's rows a block at a time (at
    K = 4,096: 64 rows; 2,048: 128): each row's outputs are still those of the row alone,
    a block's tail and the last block's odd tiles included."""
    m_all = 150 if k == 4096 else 300
    x, q, s, b = _case(m_all, n, k, bits, gs, seed=k + n)
    packed = native.pack_quantized(q, s, b, gs, bits)
    full = _run(x, packed, n, gs, bits)
    for i in (0, 63, 64, 127, 128, m_all - 1):
        assert np.array_equal(_run(x[i:i + 1], packed, n, gs, bits), full[i:i + 1]), i
    for m in (9, 65, 129, m_all - 1):
        assert np.array_equal(_run(x[m_all - m:], packed, n, gs, bits), full[m_all - m:]), m
    assert np.array_equal(_run(x, packed, n, gs, bits, scalar=True), full)  # portable
    monkeypatch.setenv("BATCHCHAT_NATIVE_AVX512", "0")
    assert np.array_equal(_run(x, packed, n, gs, bits), full)  # AVX2 (or portable)


def test_siblings_in_one_op_equal_each_alone_and_zero_input_gives_zero() -> None:
    x, q, s, b = _case(7, 64, 256, 4, 32, seed=5)
    _, q2, s2, b2 = _case(7, 24, 256, 4, 32, seed=6)
    p1, p2 = native.pack_quantized(q, s, b, 32, 4), native.pack_quantized(q2, s2, b2, 32, 4)
    one, two = native.packed_matvec_many(x, [p1, p2], [64, 24], 32, 4)
    assert np.array_equal(np.array(one), _run(x, p1, 64, 32, 4))
    assert np.array_equal(np.array(two), _run(x, p2, 24, 32, 4))
    zeros = _run(mx.zeros((2, 256)), p1, 64, 32, 4)
    assert np.array_equal(zeros, np.zeros_like(zeros))


@pytest.mark.parametrize("scalar", [False, True], ids=["simd", "portable"])
def test_siblings_of_other_layouts_in_one_op_equal_each_alone(scalar: bool) -> None:
    """A Q4_K_M file's attention: q and k in one form, v in another (groups of 16). One op
    reads each weight in its own layout, and each output has the bits of its own call, for
    one row and for a batch."""
    x16, w16, s16, b16, _, _ = _case16(9, 40, 256, 8, seed=3)
    x, q, s, b = _case(9, 64, 256, 4, 32, seed=7)
    _, q64, s64, b64 = _case(9, 24, 256, 8, 64, seed=8)
    parts = [(native.pack_quantized(q, s, b, 32, 4), 64, (32, 4, 0)),
             (native.pack_quantized(w16, s16, b16, 16, 8), 40, (16, 8, 0)),
             (native.pack_quantized(q64, s64, b64, 64, 8), 24, (64, 8, 0))]
    for rows in (x[:1], x, x16):
        together = native.packed_matvec_many(
            rows, [p for p, _, _ in parts], [n for _, n, _ in parts], 32, 4,
            force_scalar=scalar, layouts=[layout for _, _, layout in parts])
        for out, (packed, n, (gs, bits, _)) in zip(together, parts, strict=True):
            assert np.array_equal(np.array(out), _run(rows, packed, n, gs, bits, scalar))
    with pytest.raises(ValueError, match="layouts"):
        native.packed_matvec_many(x, [p for p, _, _ in parts], [64, 40, 24], 32, 4,
                                  layouts=[(32, 4, 0)])


@pytest.mark.parametrize("bad", ["bits", "k", "n"])
def test_rejects_mismatched_arguments(bad: str) -> None:
    x, q, s, b = _case(2, 32, 128, 4, 32, seed=1)
    packed = native.pack_quantized(q, s, b, 32, 4)
    args = {"x": x, "n": 32, "bits": 4}
    args |= {"bits": {"bits": 8}, "k": {"x": mx.zeros((2, 96))}, "n": {"n": 64}}[bad]
    with pytest.raises(ValueError, match="packed"):
        native.packed_matvec_many(args["x"], [packed], [args["n"]], 32, args["bits"])


def _case16(m: int, n: int, k: int, bits: int, seed: int):
    """A weight in groups of 16 (GGUF's Q6_K / Q2_K form, which mx.quantize cannot make):
    MLX's packed layout, its float64 product with x, and the int8 rounding bound."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 2 ** bits, (n, k), dtype=np.uint8)
    s = (rng.standard_normal((n, k // 16)) * 0.01).astype(np.float32)
    b = (rng.standard_normal((n, k // 16)) * 0.05).astype(np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    packed = q if bits == 8 else q[:, 0::2] | (q[:, 1::2] << np.uint8(4))
    w = (q.reshape(n, -1, 16) * s[..., None] + b[..., None]).reshape(n, k).astype(np.float64)
    step = np.repeat(np.abs(x.reshape(m, -1, 32)).max(-1) / 127.0, 32, axis=-1)
    bound = 0.5 * step @ np.abs(w).T + 2 * (k + 2) * 2.0 ** -24 * (np.abs(x) + step) @ np.abs(w).T
    return (mx.array(x), mx.array(np.ascontiguousarray(packed).view(np.uint32)), mx.array(s),
            mx.array(b), x @ w.T, bound)


@pytest.mark.parametrize("bits", [4, 8])
def test_groups_of_16_within_the_bound_and_the_same_in_any_batch_on_every_path(
        bits: int, monkeypatch: pytest.MonkeyPatch) -> None:
    x, w, s, b, ref, bound = _case16(21, 37, 768, bits, seed=bits)
    packed = native.pack_quantized(w, s, b, 16, bits)
    full = _run(x, packed, 37, 16, bits)
    err = np.abs(full - ref)
    assert np.all(err <= bound), f"max err {err.max()}"
    assert 1e-4 < float(np.median(err / bound)) < 0.2
    for m in (1, 2, 3, 8, 13):
        assert np.array_equal(_run(x[21 - m:], packed, 37, 16, bits), full[21 - m:]), m
    assert np.array_equal(_run(x, packed, 37, 16, bits, scalar=True), full)  # portable
    monkeypatch.setenv("BATCHCHAT_NATIVE_AVX512", "0")
    assert np.array_equal(_run(x, packed, 37, 16, bits), full)  # AVX2


def test_groups_of_16_only_in_the_packed_kernel() -> None:
    x, w, s, b, _, _ = _case16(2, 16, 64, 8, seed=1)
    with pytest.raises(ValueError, match="group_size"):
        native.quantized_matvec(x, w, s, b, 16, 8)
