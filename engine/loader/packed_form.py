"""A linear's weights decoded once, into the native kernel's packed layout, with MLX's affine
arrays as lazy views of them (issue #45: one copy of the weights instead of two).

On the CPU with the native packed kernel, the engine runs every quantized linear on a packed
copy (engine/native/src/packed.h: panels of 16 rows side by side). The loader used to decode
a GGUF tensor into MLX's affine layout (the mlx-lm model's ``weight``, ``scales``,
``biases``) and the engine packed a second copy of it. Now the loader decodes the GGML blocks
straight into the packed layout (`ggml_to_packed_arrays`) and gives mlx-lm's module arrays
that are *unevaluated* MLX views of the packed ones (a reshape, a transpose, a slice, the
4-bit nibbles re-paired): the engine reads the packed arrays (attached to the module as
`Prepacked`, not a parameter), and whoever evaluates the mlx-lm model's arrays (mlx-lm's own
generators, tests, an export) gets the same bits the affine decoder gives, made then.

Q4_K, Q5_K and Q6_K are packed in forms of their own, near their file's width (issue #48,
src/packed.h): the file's sub-scales and super-block scales, whose products the kernel forms
in float32 as gguf-py does. Their views compute those products in MLX (float32, one
rounding each, the same bits), and Q5_K's / Q6_K's values are put back together as bytes.
Q4_0, Q8_0 and Q5_0 keep the file's fp16 d alone (scale-only: their bias is d * -8, -128
or -16, exact), the file's width: a MoE decode step's experts cost the bytes they read. Q5_1
and Q4_1 keep the file's fp16 d and m (scale d, bias m): llama.cpp's Q4_K_M / Q5_K_M write
rows that are not whole 256-blocks in Q5_0 / Q5_1 (SmolLM2's and Gemma 3's MLPs), and the
bundled model is Q4_1. Q5_0's / Q5_1's values sit in Q5_K's 5-bit layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn

PANEL = 16  # rows a panel (kPanel in packed.h)
SUPER = 256  # a K-quant's super-block (kSuper)
ATTR = "_batchchat_prepacked"  # the module attribute that holds a Prepacked
# packed.h's Form: MLX's affine scales and biases, Q4_K's / Q6_K's / Q5_K's own parts,
# Q4_0's / Q8_0's / Q5_0's fp16 scales alone, or Q5_1's / Q4_1's fp16 scales and minimums
AFFINE, Q4K, Q6K, Q5K, Q40, Q80, Q50, Q51, Q41 = 0, 1, 2, 3, 4, 5, 6, 7, 8
# a file form's (group size, bits) in the kernel
_KERNEL_LAYOUT = {Q4K: (32, 4), Q6K: (16, 6), Q5K: (32, 5), Q40: (32, 4), Q80: (32, 8),
                  Q50: (32, 5), Q51: (32, 5), Q41: (32, 4)}
# a scale-only form's bias: d times this (exact in float32)
SCALE_ONLY_BIAS = {Q40: -8.0, Q80: -128.0, Q50: -16.0}
# the forms with the file's fp16 d and m a 32-block: scales (panels, K / 32, 32), d then m
SCALE_MIN = frozenset({Q51, Q41})


@dataclass(frozen=True, eq=False)
class Prepacked:
    """The loader's packed triple for a module's weight: pack_quantized's (weights uint8
    (panels * 16, K * bits / 8), scales and biases float32 (panels, K / group, 16)), or a
    K-quant's form (Q4_K / Q5_K: scales uint8 (panels, K / 256, 256), a super-block's 6-bit
    sc and m and fp16 d and dmin by lane; Q6_K: scales int8 (panels, K / 256, 288), its
    int8 sub-scales and fp16 d by lane; biases empty (panels, 0, 16); Q4_0 / Q8_0 / Q5_0:
    scales the file's fp16 d a 32-block (panels, K / 32, 16); Q5_1 / Q4_1: its fp16 d then
    m (panels, K / 32, 32); biases empty (panels, 0, 16); packed.h)."""

    weight: mx.array
    scales: mx.array
    biases: mx.array

    def arrays(self) -> list[mx.array]:
        return [self.weight, self.scales, self.biases]

    @property
    def form(self) -> int:
        """packed.h's Form, told by the sub-scales' dtype (ggml_to_packed_arrays') and, for
        Q4_K / Q5_K, the weights' bytes a row against the super-blocks' K."""
        if self.scales.dtype == mx.int8:
            return Q6K
        if self.scales.dtype == mx.float16:  # K = 32 a group; the weight's bits tell the type
            bits = self.weight.shape[1] * 8 // (self.scales.shape[1] * 32)
            if self.scales.shape[2] == 2 * PANEL:  # d and m
                return Q41 if bits == 4 else Q51
            return {4: Q40, 5: Q50}.get(bits, Q80)
        if self.scales.dtype != mx.uint8:
            return AFFINE
        k = self.scales.shape[1] * SUPER
        return Q5K if self.weight.shape[1] * 8 == 5 * k else Q4K

    def kernel_layout(self, group_size: int, bits: int) -> tuple[int, int]:
        """The (group size, bits) the packed kernel takes for this weight: a K form's own,
        else the module's."""
        return _KERNEL_LAYOUT.get(self.form, (group_size, bits))


def _lane_major(x: mx.array) -> mx.array:
    """(panels, G, lanes) → (panels, lanes, G)."""
    return x.transpose(0, 2, 1)


def _scale_parts(pk: Prepacked) -> list[mx.array]:
    """The arrays the scales and biases are made of, each (panels, 16, ...) lane-major
    (lazy transposes): affine [scales, biases]; Q4_K [sc, m, d, dmin]; Q6_K [sc, d];
    Q4_0 / Q8_0 / Q5_0 [d]; Q5_1 / Q4_1 [d, m]."""
    sub, sup = _lane_major(pk.scales), _lane_major(pk.biases)
    if pk.form in SCALE_ONLY_BIAS:
        return [sub]
    if pk.form in SCALE_MIN:
        return [_lane_major(pk.scales[..., :PANEL]), _lane_major(pk.scales[..., PANEL:])]
    if pk.form in (Q4K, Q5K):
        return list(_k4_parts(pk.scales))
    if pk.form == Q6K:
        return list(_k6_parts(pk.scales))
    return [sub, sup]


def _k6_parts(scales: mx.array) -> tuple[mx.array, mx.array]:
    """Q6_K's scales (panels, K / 256, 288) int8 (packed.h) as sc (panels, 16, K / 16) int8
    and d (panels, 16, K / 256) fp16, lane-major."""
    p, s, _ = scales.shape
    sc = scales[..., :256].reshape(p, s, 16, PANEL).transpose(0, 3, 1, 2).reshape(p, PANEL, s * 16)
    return sc, _lane_major(mx.view(mx.contiguous(scales[..., 256:]), mx.float16))


def _k4_parts(scales: mx.array) -> tuple[mx.array, mx.array, mx.array, mx.array]:
    """Q4_K's / Q5_K's scales (panels, K / 256, 256) (packed.h) as sc, m (panels, 16,
    K / 32) uint8 and d, dmin (panels, 16, K / 256) fp16, lane-major."""
    p, s, _ = scales.shape
    low = scales[..., :128].reshape(p, s, 8, PANEL)  # (.., super, g, lane)
    high = mx.view(mx.contiguous(scales[..., 128:192]), mx.uint32).reshape(p, s, 1, PANEL)
    shift = (4 * mx.arange(8, dtype=mx.uint32)).reshape(1, 1, 8, 1)
    hi = (high >> shift) & 15  # (.., super, g, lane): sc's 2 high bits, then m's
    sc = (low & 15).astype(mx.uint32) | ((hi & 3) << 4)
    m = (low >> 4).astype(mx.uint32) | ((hi >> 2) << 4)

    def lanes(x: mx.array) -> mx.array:  # (.., super, g, lane) → (.., lane, super * g)
        return x.astype(mx.uint8).transpose(0, 3, 1, 2).reshape(p, PANEL, s * 8)

    def halves(lo: int) -> mx.array:
        return _lane_major(mx.view(mx.contiguous(scales[..., lo:lo + 32]), mx.float16))

    return lanes(sc), lanes(m), halves(192), halves(224)


def _scales_biases(form: int, parts: list[mx.array]) -> tuple[mx.array, mx.array]:
    """Affine scales and biases (..., K / group) float32 from `_scale_parts` (or rows of
    them): a K form's products formed as ggml_decode.cpp and gguf-py form them, in float32
    with one rounding each (the sub-scales are small integers: exact as floats)."""
    if form == AFFINE:
        return parts[0], parts[1]
    if form in SCALE_ONLY_BIAS:  # fp16 d (exact in float32) and d * -8 (or -128), exact
        scales = parts[0].astype(mx.float32)
        return scales, scales * SCALE_ONLY_BIAS[form]
    if form in SCALE_MIN:  # fp16 d and m, each exact in float32
        return parts[0].astype(mx.float32), parts[1].astype(mx.float32)
    if form in (Q4K, Q5K):  # groups of 32, 8 a super-block: d * sc and -(dmin * m)
        sc, m, d, dmin = parts  # d, dmin the file's fp16 (exact in float32)
        d, dmin = d.astype(mx.float32), dmin.astype(mx.float32)
        return (mx.repeat(d, 8, axis=-1) * sc.astype(mx.float32),
                -(mx.repeat(dmin, 8, axis=-1) * m.astype(mx.float32)))
    sc, d = parts  # Q6_K: groups of 16, 16 a super-block: d * sc and (d * sc) * -32
    scales = mx.repeat(d.astype(mx.float32), 16, axis=-1) * sc.astype(mx.float32)
    return scales, scales * -32.0


def _six_bit_parts(w: mx.array, k: int) -> tuple[mx.array, mx.array]:
    """Q6_K's packed bytes lane-major (packed.h): the low nibbles (panels, 16, blocks, j 4,
    i 4) in the 4-bit layout and the high bit pairs (panels, 16, blocks, h 2, i 4)."""
    panels, blocks = w.shape[0] // PANEL, k // 32
    blk = w.reshape(panels, blocks, 384)
    nib = blk[..., :256].reshape(panels, blocks, 4, PANEL, 4).transpose(0, 3, 1, 2, 4)
    pairs = blk[..., 256:].reshape(panels, blocks, 2, PANEL, 4).transpose(0, 3, 1, 2, 4)
    return nib, pairs


def _six_bit_values(nib: mx.array, pairs: mx.array, k: int) -> mx.array:
    """(..., K) uint8 values from `_six_bit_parts` (or rows of them): byte 4n + i of high
    plane h holds in bits 2t the high bits of step j = 2h + t // 2, nibble t % 2."""
    lead = nib.shape[:-3]
    low = mx.stack([nib & 0x0F, nib >> 4], axis=-2)  # (..., blocks, j, half, i)
    high = mx.stack([(pairs >> (2 * t)) & 3 for t in range(4)], axis=-2)  # (.., h, t, i)
    high = high.reshape(*lead, k // 32, 4, 2, 4)  # t = 2 * (j % 2) + half
    return (low | (high << 4)).reshape(*lead, k)


def _five_bit_parts(w: mx.array, k: int) -> tuple[mx.array, mx.array]:
    """Q5_K's packed bytes lane-major (packed.h): the low nibbles (panels, 16, blocks, j 4,
    i 4) in the 4-bit layout and the high bits (panels, 16, blocks, i 4)."""
    panels, blocks = w.shape[0] // PANEL, k // 32
    blk = w.reshape(panels, blocks, 320)
    nib = blk[..., :256].reshape(panels, blocks, 4, PANEL, 4).transpose(0, 3, 1, 2, 4)
    bits = blk[..., 256:].reshape(panels, blocks, PANEL, 4).transpose(0, 2, 1, 3)
    return nib, bits


def _five_bit_values(nib: mx.array, bits: mx.array, k: int) -> mx.array:
    """(..., K) uint8 values from `_five_bit_parts` (or rows of them): bit t of byte 4n + i
    is the high bit of step j = t // 2, nibble t % 2."""
    lead = nib.shape[:-3]
    low = mx.stack([nib & 0x0F, nib >> 4], axis=-2)  # (..., blocks, j, half, i)
    high = mx.stack([(bits >> t) & 1 for t in range(8)], axis=-2)  # (..., blocks, t, i)
    high = high.reshape(*lead, k // 32, 4, 2, 4)
    return (low | (high << 4)).reshape(*lead, k)


# the forms whose values are put back as bytes: (their bits, parts, values)
_BYTE_FORMS = {Q6K: (6, _six_bit_parts, _six_bit_values),
               Q5K: (5, _five_bit_parts, _five_bit_values),
               Q50: (5, _five_bit_parts, _five_bit_values),
               Q51: (5, _five_bit_parts, _five_bit_values)}


def _byte_values(pk: Prepacked, k: int, ids: mx.array | None = None) -> mx.array:
    """A Q5_K / Q6_K weight's values, (panels, 16, K) or, for `ids`, (*ids.shape, K) uint8
    (the rows' bytes gathered first: an embedding's lookup decodes only its rows)."""
    _, split, join = _BYTE_FORMS[pk.form]
    parts = split(pk.weight, k)
    if ids is not None:
        parts = tuple(_lanes(a, ids) for a in parts)
    return join(*parts, k)


def _rows(x: mx.array, n: int) -> mx.array:
    """(panels, 16, G) → (n, G): a panel's lanes as rows."""
    p, _, g = x.shape
    return x.reshape(p * PANEL, g)[:n]


def affine_views(pk: Prepacked, n: int, bits: int, scale_dtype: mx.Dtype
                 ) -> tuple[mx.array, mx.array, mx.array]:
    """MLX's affine (weight uint32 (n, K * bits / 32), scales, biases (n, K / group)) as
    unevaluated views of the packed arrays: nothing is computed until someone evaluates
    them. Layout (packed.h): per panel and 32-block, 8-bit: byte 64j + 4·lane + i holds
    q[4j + i]; 4-bit: byte 64j + 4·lane + i holds q[8j + i] low, q[8j + 4 + i] high (Q5_K,
    Q6_K, Q5_0, Q5_1: their low nibbles, then the high bits). `bits`: the module's (8 for
    those)."""
    w = pk.weight
    rows, width = w.shape
    k = width * 8 // (_BYTE_FORMS[pk.form][0] if pk.form in _BYTE_FORMS else bits)
    panels, blocks = rows // PANEL, k // 32
    if pk.form in _BYTE_FORMS:  # MLX's 8-bit form: a value a byte
        q = _byte_values(pk, k).reshape(panels * PANEL, k)[:n]
    elif bits == 8:
        q = w.reshape(panels, blocks, 8, PANEL, 4).transpose(0, 3, 1, 2, 4)
        q = q.reshape(panels * PANEL, k)[:n]
    else:
        b = w.reshape(panels, blocks, 4, 1, PANEL, 4)
        nib = mx.concatenate([b & 0x0F, b >> 4], axis=3)  # (P, blocks, j, half, lane, i)
        v = nib.transpose(0, 4, 1, 2, 3, 5).reshape(panels * PANEL, k // 2, 2)[:n]
        q = v[..., 0] | (v[..., 1] << 4)  # two values a byte, the lower index low
    weight = mx.view(mx.contiguous(q), mx.uint32)
    scales, biases = _scales_biases(pk.form, _scale_parts(pk))
    return (weight, _rows(scales, n).astype(scale_dtype), _rows(biases, n).astype(scale_dtype))


def _lanes(x: mx.array, ids: mx.array) -> mx.array:
    """Rows `ids` of a (panels, 16, ...) array: one gather over both axes (a lazy transpose
    feeds it; no whole copy is made)."""
    return x[ids // PANEL, ids % PANEL]


def lookup(pk: Prepacked, ids: mx.array, bits: int, scale_dtype: mx.Dtype
           ) -> tuple[mx.array, mx.array, mx.array]:
    """weight[ids], scales[ids], biases[ids] of `affine_views` (the same bits), gathered from
    the packed arrays: an embedding's lookup without its affine copy."""
    w = pk.weight
    rows, width = w.shape
    k = width * 8 // (_BYTE_FORMS[pk.form][0] if pk.form in _BYTE_FORMS else bits)
    panels, blocks = rows // PANEL, k // 32
    if pk.form in _BYTE_FORMS:
        q = _byte_values(pk, k, ids)
    elif bits == 8:
        q = _lanes(w.reshape(panels, blocks, 8, PANEL, 4).transpose(0, 3, 1, 2, 4), ids)
        q = q.reshape(*ids.shape, k)
    else:
        b = _lanes(w.reshape(panels, blocks, 4, PANEL, 4).transpose(0, 3, 1, 2, 4), ids)
        b = mx.expand_dims(b, -2)  # (..., blocks, j, 1, i)
        v = mx.concatenate([b & 0x0F, b >> 4], axis=-2).reshape(*ids.shape, k // 2, 2)
        q = v[..., 0] | (v[..., 1] << 4)
    weight = mx.view(mx.contiguous(q), mx.uint32)
    s, b_ = _scales_biases(pk.form, _row_scale_parts(pk, ids))
    return weight, s.astype(scale_dtype), b_.astype(scale_dtype)


def _row_scale_parts(pk: Prepacked, ids: mx.array) -> list[mx.array]:
    """`_scale_parts` of rows `ids`, (*ids.shape, ...): a K-quant's decoded from their
    panels' scales alone (gathered first, so a lookup decodes a few panels, not the table)."""
    if pk.form not in (Q4K, Q5K, Q6K):
        return [_lanes(a, ids) for a in _scale_parts(pk)]
    flat = ids.reshape(-1)
    pick = mx.arange(flat.size)
    parts = (_k4_parts if pk.form != Q6K else _k6_parts)(pk.scales[flat // PANEL])
    return [x[pick, flat % PANEL].reshape(*ids.shape, x.shape[-1]) for x in parts]


def attach(module: nn.Module, pk: Prepacked) -> None:
    """Hands `pk` to the engine with the module (a plain attribute: not a parameter, so the
    module's parameters, names and class are mlx-lm's own)."""
    object.__setattr__(module, ATTR, pk)


def prepacked(module: nn.Module) -> Prepacked | None:
    """The packed triple the loader made for this module, if any."""
    return getattr(module, ATTR, None)
