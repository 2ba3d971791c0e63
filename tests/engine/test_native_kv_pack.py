"""The native KV pack op (engine.native.kv_pack, src/kv_pack_op.cpp; issue #54): quantized KV
rows in one CPU op, the same bytes as mx.quantize's words, scales and biases laid end to end
(KvPacking.pack without the extension), bit for bit."""

from __future__ import annotations

import mlx.core as mx
import pytest

from engine import native
from engine.kv_quant import KvPacking, PackedLayer

pytestmark = pytest.mark.usefixtures("native_built")


def rows_to_pack(dim: int) -> mx.array:
    """Random rows at several scales, and the rows mx.quantize treats apart: all zeros, one
    value repeated (max == min: the eps scale), a lone outlier, positive only, negative
    only, a value on a rounding tie."""
    key = mx.random.key(7)
    x = mx.random.normal((2, 3, 40, dim), key=key)
    x = x * mx.array([1e-4, 1.0, 30.0])[None, :, None, None]
    special = mx.stack([
        mx.zeros((dim,)), mx.full((dim,), 2.5), mx.full((dim,), -3.0),
        mx.zeros((dim,)).at[5].add(100.0), mx.abs(x[0, 1, 0]) + 1, -mx.abs(x[0, 1, 1]) - 1,
        mx.arange(dim, dtype=mx.float32) / 2 - dim / 4])
    return mx.concatenate([x, mx.broadcast_to(special[None, None], (2, 3, 7, dim))], axis=2)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("dim", [64, 128, 256])
def test_the_same_bytes_as_mx_quantize(bits, group, dim) -> None:
    if dim % group:
        pytest.skip("the group must divide the head")
    p = KvPacking(bits, group)
    x = rows_to_pack(dim)
    got = native.kv_pack(x, bits, group)
    assert got.dtype == mx.uint8 and got.shape == (*x.shape[:-1], p.width(dim))
    assert mx.array_equal(got, p.pack(x)).item()
    assert mx.array_equal(p.unpack(got), p.unpack(p.pack(x))).item()


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("dim", [32, 64, 128, 256])
def test_turned_the_same_bytes_as_mx_hadamard_transform_then_mx_quantize(bits, dim) -> None:
    """turn=True (the 4-bit form's rows, kv_quant.KvPacking.turned): the row turned as
    mx.hadamard_transform turns it (its butterflies, its 1/sqrt(D)), then packed."""
    p = KvPacking(bits, 32, turned=True)
    x = rows_to_pack(dim)
    got = native.kv_pack(x, bits, 32, turn=True)
    assert mx.array_equal(got, p.pack(x)).item()  # mx.hadamard_transform, mx.quantize
    assert mx.array_equal(got, p.pack(x, native=True)).item()
    assert not mx.array_equal(got, native.kv_pack(x, bits, 32)).item()


@pytest.mark.parametrize("bits", [8, 4])
def test_strided_views_and_one_row_alone(bits) -> None:
    p = KvPacking(bits, 64 if bits == 8 else 32)  # the op packs rows as given (not turned)
    x = rows_to_pack(64)
    view = mx.swapaxes(x, 1, 2)  # not row-contiguous
    assert mx.array_equal(native.kv_pack(view, bits, p.group), p.pack(view)).item()
    whole = native.kv_pack(x, bits, p.group)
    assert mx.array_equal(native.kv_pack(x[1:2, 2:3, 9:10], bits, p.group),
                          whole[1:2, 2:3, 9:10]).item()
    assert native.kv_pack(x[:, :, :0], bits, p.group).shape == (2, 3, 0, p.width(64))


def test_the_packed_layer_packs_natively_when_the_kernel_reads_the_rows() -> None:
    """A PackedLayer in front of a cache stores the same rows whichever way it packs (4
    bits: rows turned by mx.hadamard_transform first, either way)."""
    from mlx_lm.models.cache import KVCache

    p = KvPacking.for_head(4, 64)
    k, v = rows_to_pack(64)[:1], rows_to_pack(64)[1:]
    fused = PackedLayer(KVCache(), p, fused=True)
    plain = PackedLayer(KVCache(), p, fused=False)
    fk, fv = fused.update_and_fetch(k, v)
    plain.update_and_fetch(k, v)
    assert mx.array_equal(fk, plain.inner.keys[..., :k.shape[2], :]).item()
    assert mx.array_equal(fv, plain.inner.values[..., :k.shape[2], :]).item()


def test_bad_arguments() -> None:
    x = mx.zeros((2, 64))
    for args, match in [((x.astype(mx.float16), 8, 64), "float32"),
                        ((x, 3, 64), "bits"), ((x, 8, 48), "group"),
                        ((mx.zeros((2, 96)), 8, 64), "multiple")]:
        with pytest.raises(ValueError, match=match):
            native.kv_pack(*args)
    with pytest.raises(ValueError, match="power-of-two"):
        native.kv_pack(mx.zeros((2, 96)), 8, 32, turn=True)
