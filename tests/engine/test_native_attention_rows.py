"""engine.native.cache_attention_rows: each batch row's keys and values in arrays of their
own (issue #47, one KV layout), against cache_attention over the same rows stacked into one
buffer. The two must give the same bits: the kernel is the same, only where it finds a
row's keys differs. Every row's own buffer is a view of a larger array holding other values
past the view, and the stacked buffer holds different values past each row's length, so a
kernel reading a key it should not (past a row's buffer, or a masked one) changes the output.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from engine import native
from engine.kv_quant import KvPacking
from engine.slot_cache import row_mask

pytestmark = pytest.mark.usefixtures("native_built")


def _rows(lengths, spare, hkv, dim, seed):
    """Row b: (1, hkv, lengths[b] + spare[b], dim) views of a wider array, noise past them."""
    mx.random.seed(seed)
    keys, values = [], []
    for length, extra in zip(lengths, spare, strict=True):
        width = length + extra
        keys.append(mx.random.normal((1, hkv, width + 29, dim))[:, :, :width])
        values.append(mx.random.normal((1, hkv, width + 29, dim))[:, :, :width])
    return keys, values


def _stacked(rows, total, seed):
    """The rows in one (B, H, total, D) buffer, other noise past each row's own columns."""
    mx.random.seed(seed + 1)
    _, h, _, d = rows[0].shape
    out = mx.random.normal((len(rows), h, total, d)).astype(rows[0].dtype)
    if rows[0].dtype == mx.uint8:
        out = (mx.random.uniform(shape=(len(rows), h, total, d)) * 255).astype(mx.uint8)
    for b, row in enumerate(rows):
        n = min(row.shape[2], total)
        out[b:b + 1, :, :n] = row[:, :, :n]
    return out


def _queries(b, hq, steps, dim, seed):
    mx.random.seed(seed + 2)
    return mx.random.normal((b, steps, hq, dim)).transpose(0, 2, 1, 3)


KERNELS = {"tiled": {}, "two-pass": {"tiled_from": 0}, "scalar": {"force_scalar": True}}


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("case", [
    # (lengths, spare columns a row, query heads, key heads, steps, head size)
    ([40, 700, 3, 257], [1, 1, 300, 5], 9, 3, 1, 64),   # decode rows of their own widths
    ([12, 500, 90], [3, 3, 3], 9, 3, 3, 64),             # a row's input and 2 drafts each
    ([5, 33], [1, 200], 4, 2, 1, 32),                    # D = 32
    ([7, 18, 2], [1, 1, 1], 6, 2, 1, 12),                # head size not a multiple of 8
], ids=["decode", "drafts", "d32", "odd-dim"])
@pytest.mark.parametrize("mask", ["bool", "additive", "none"])
def test_same_bits_as_one_stacked_buffer(case, mask, kernel) -> None:
    lengths, spare, hq, hkv, steps, dim = case
    seed = sum(lengths) + dim
    keys, values = _rows(lengths, spare, hkv, dim, seed)
    q = _queries(len(lengths), hq, steps, dim, seed)
    if mask == "none":  # every key of a row's own buffer; the stacked form masks the rest
        total = max(length + extra for length, extra in zip(lengths, spare, strict=True))
        mine = None
        widths = mx.array([k.shape[2] for k in keys])
        theirs = (mx.arange(total)[None, :] < widths[:, None])[:, None, None, :]
    else:  # each row sees its own keys, as the decode batch's mask has it
        m = row_mask(mx.array(lengths), steps, max(lengths) + steps)
        total = m.shape[-1]
        mine = theirs = m if mask == "bool" else mx.where(m, 0.0, -mx.inf)
    scale = dim**-0.5
    out = native.cache_attention_rows(q, keys, values, scale, mine, **KERNELS[kernel])
    ref = native.cache_attention(q, _stacked(keys, total, seed), _stacked(values, total, seed),
                                 scale, theirs, **KERNELS[kernel])
    assert out.shape == ref.shape == (len(lengths), hq, steps, dim)
    assert np.array_equal(np.array(out), np.array(ref))


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("scalar", [False, True])
def test_packed_rows_same_bits_as_one_stacked_buffer(bits, scalar) -> None:
    """Quantized KV (engine/kv_quant.py): each row's packed bytes where they are."""
    lengths, spare, hq, hkv, dim = [30, 300, 2], [1, 2, 90], 8, 2, 64
    packing = KvPacking.for_head(bits, dim)
    keys, values = _rows(lengths, spare, hkv, dim, seed=bits)
    keys = [packing.pack(k) for k in keys]
    values = [packing.pack(v) for v in values]
    q = _queries(len(lengths), hq, 1, dim, seed=bits)
    m = row_mask(mx.array(lengths), 1, max(lengths) + 1)
    out = native.cache_attention_rows(q, keys, values, dim**-0.5, m, packing=packing,
                                      force_scalar=scalar)
    total = m.shape[-1]
    ref = native.cache_attention(q, _stacked(keys, total, bits), _stacked(values, total, bits),
                                 dim**-0.5, m, packing=packing, force_scalar=scalar)
    assert np.array_equal(np.array(out), np.array(ref))


def test_sinks_and_softcap_same_bits() -> None:
    lengths, spare = [20, 64], [1, 40]
    keys, values = _rows(lengths, spare, 2, 32, seed=3)
    q = _queries(2, 4, 1, 32, seed=3)
    m = row_mask(mx.array(lengths), 1, max(lengths) + 1)
    sinks = mx.array([0.5, -1.0, 2.0, 0.0])
    out = native.cache_attention_rows(q, keys, values, 0.2, m, sinks=sinks, softcap=5.0)
    total = m.shape[-1]
    ref = native.cache_attention(q, _stacked(keys, total, 3), _stacked(values, total, 3),
                                 0.2, m, sinks=sinks, softcap=5.0)
    assert np.array_equal(np.array(out), np.array(ref))


def test_a_row_grown_in_place_is_read_at_its_new_length() -> None:
    """The arrays are read when the op runs: a row's buffer written past its old length
    (as a decode step writes its new key) is seen through a view of the new width."""
    keys, values = _rows([10, 10], [6, 6], 2, 16, seed=4)
    q = _queries(2, 2, 1, 16, seed=4)
    short = native.cache_attention_rows(q, keys, values, 0.25,
                                        row_mask(mx.array([10, 10]), 1, 11))
    longer = native.cache_attention_rows(q, keys, values, 0.25,
                                         row_mask(mx.array([10, 15]), 1, 16))
    a, b = np.array(short), np.array(longer)
    assert np.array_equal(a[0], b[0]) and not np.array_equal(a[1], b[1])


def test_bad_arguments_are_refused() -> None:
    keys, values = _rows([4, 5], [1, 1], 2, 16, seed=6)
    q = _queries(2, 4, 1, 16, seed=6)
    with pytest.raises(ValueError, match="one k and one v array a batch row"):
        native.cache_attention_rows(q, keys[:1], values[:1], 0.25)
    with pytest.raises(ValueError, match="T_row"):
        native.cache_attention_rows(q, [keys[0], keys[1][:, :1]], values, 0.25)
    with pytest.raises(ValueError, match="multiple"):
        native.cache_attention_rows(_queries(2, 3, 1, 16, seed=6), keys, values, 0.25)


def test_rows_as_regions_of_one_arena() -> None:
    """Rows may be column ranges of one per-layer arena (1, H, C, D) (each row's view
    (1, H, cap, D) strided by the arena's width): the layout where one in-place write op
    serves every row. Same bits as the rows stacked."""
    lengths, caps = [30, 200, 7], [64, 256, 16]
    mx.random.seed(9)
    arena_k = mx.random.normal((1, 3, sum(caps) + 5, 32))
    arena_v = mx.random.normal((1, 3, sum(caps) + 5, 32))
    starts = [0, caps[0], caps[0] + caps[1]]
    keys = [arena_k[:, :, s:s + c] for s, c in zip(starts, caps, strict=True)]
    values = [arena_v[:, :, s:s + c] for s, c in zip(starts, caps, strict=True)]
    q = _queries(3, 6, 1, 32, seed=9)
    m = row_mask(mx.array(lengths), 1, max(lengths) + 1)
    out = native.cache_attention_rows(q, keys, values, 0.3, m)
    total = m.shape[-1]
    ref = native.cache_attention(q, _stacked(keys, total, 9), _stacked(values, total, 9), 0.3, m)
    assert np.array_equal(np.array(out), np.array(ref))
