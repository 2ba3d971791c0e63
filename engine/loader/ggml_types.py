"""GGML tensor types as affine groups the engine's kernels run, exactly.

Every quantized GGML type this module knows is, for each group of 16 or 32 weights along a
row, ``w = scale * q + bias`` with an unsigned integer ``q`` and float32 ``scale`` and
``bias`` — the form of MLX's affine quantization and of the engine's packed int8 kernel. The
products involved are exact in float32 (an fp16 block scale has 11 significant bits, a
sub-block scale at most 8, ``q`` at most 8), so ``scale * q + bias`` rounds once where gguf-py's
``dequantize`` rounds once, and the two give the same bits (tests/engine/test_ggml_types.py
checks every type on random blocks).

How each type maps (``bits`` is the width the engine stores ``q`` in, 4 or 8):

- Q4_0, Q4_1, Q4_K: 4-bit, groups of 32 (Q4_K: scale d·sc, bias −dmin·m per 32-wide
  sub-block);
- Q8_0, Q5_0, Q5_1, Q5_K, IQ4_NL, IQ4_XS, MXFP4: 8-bit, groups of 32 (5-bit values, and the
  non-linear 4-bit codebooks shifted to unsigned bytes: there is no exact narrower form);
- Q3_K: 8-bit, groups of 32 (its 16-wide sub-block scale times its 3-bit value is one byte,
  over the super-block's one fp16 scale);
- Q6_K, Q2_K: 8-bit (Q2_K 4-bit), groups of 16 (their sub-blocks are 16 wide, each with a
  scale of its own). MLX has no affine groups of 16: engine/loader/ggml_modules.py runs
  them, and the native packed kernel takes them.

F32, F16 and BF16 are floats; anything else (IQ1-IQ3, TQ, NVFP4) has no affine form here
and raises ``UnsupportedTensorType``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, dequantize
from gguf.quants import IQ4_NL, MXFP4, Q4_K

T = GGMLQuantizationType
FLOAT_TYPES = frozenset({T.F32, T.F16, T.BF16})


class UnsupportedTensorType(ValueError):
    """A GGML tensor type without an affine form here."""


@dataclass(frozen=True)
class AffineTensor:
    """w[..., n, k] = scales[..., n, k // group] * q[..., n, k] + biases[..., n, k // group],
    q held packed as MLX packs it."""

    packed: np.ndarray  # (..., N, K * bits / 32) uint32: value k at bits (k % (32/bits))*bits
    scales: np.ndarray  # (..., N, K // group) float32
    biases: np.ndarray
    group: int  # 16 or 32
    bits: int  # 4 or 8: every q < 2**bits

    @property
    def q(self) -> np.ndarray:
        """The values, one uint8 each: (..., N, K)."""
        raw = self.packed.view(np.uint8)
        if self.bits == 8:
            return raw
        return np.stack([raw & np.uint8(0x0F), raw >> np.uint8(4)], axis=-1).reshape(
            *raw.shape[:-1], raw.shape[-1] * 2)

    def dequantize(self) -> np.ndarray:
        """The float32 weights (numpy, the same arithmetic as the engine's own)."""
        q = self.q
        shape = q.shape
        q = q.reshape(*shape[:-1], -1, self.group).astype(np.float32)
        w = q * self.scales[..., None] + self.biases[..., None]
        return w.reshape(shape)

    def rows(self, order: np.ndarray) -> AffineTensor:
        """The same tensor with its rows (the second-last axis) in `order`."""
        return AffineTensor(self.packed[..., order, :], self.scales[..., order, :],
                            self.biases[..., order, :], self.group, self.bits)


def pack(q: np.ndarray, bits: int) -> np.ndarray:
    """(..., K) uint8 values in MLX's packed layout: (..., K * bits / 32) uint32."""
    if bits == 4:
        q = q[..., 0::2] | (q[..., 1::2] << np.uint8(4))
    return np.ascontiguousarray(q).view(np.uint32)


@dataclass(frozen=True)
class TypeForm:
    """How a GGML type is held: its affine group and storage width."""

    group: int
    bits: int


def _f16(b: np.ndarray) -> np.ndarray:
    """Two bytes per row as a float32 column (fp16 → float32 is exact)."""
    return np.ascontiguousarray(b).view(np.float16).astype(np.float32)


def _nibbles(qs: np.ndarray, n: int) -> np.ndarray:
    """(blocks, n/2) packed bytes → (blocks, n): low nibbles first, then high ones."""
    return np.concatenate([qs & np.uint8(0x0F), qs >> np.uint8(4)], axis=-1)


def _bits_of(packed: np.ndarray, n: int) -> np.ndarray:
    """(blocks, n/8) bytes → (blocks, n) bits, little end first."""
    return np.unpackbits(packed, axis=-1, bitorder="little")[..., :n]


# Each converter takes blocks (nb, type_size) uint8 and returns q (nb, block), scales and
# biases (nb, block // group) float32.

def _q4_0(b: np.ndarray):
    d = _f16(b[:, :2])
    return _nibbles(b[:, 2:], 32), d, d * np.float32(-8)


def _q4_1(b: np.ndarray):
    return _nibbles(b[:, 4:], 32), _f16(b[:, :2]), _f16(b[:, 2:4])


def _q5(b: np.ndarray, offset: int):
    qh = _bits_of(b[:, offset:offset + 4], 32)
    return _nibbles(b[:, offset + 4:], 32) | (qh << np.uint8(4))


def _q5_0(b: np.ndarray):
    d = _f16(b[:, :2])
    return _q5(b, 2), d, d * np.float32(-16)


def _q5_1(b: np.ndarray):
    return _q5(b, 4), _f16(b[:, :2]), _f16(b[:, 2:4])


def _q8_0(b: np.ndarray):
    d = _f16(b[:, :2])
    q = (b[:, 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
    return q, d, d * np.float32(-128)


def _k_scales(b: np.ndarray):
    d, dmin = _f16(b[:, 0:2]), _f16(b[:, 2:4])
    sc, m = Q4_K.get_scale_min(np.ascontiguousarray(b[:, 4:16]))
    return d * sc.astype(np.float32), -(dmin * m.astype(np.float32))


def _q4_k(b: np.ndarray):
    scale, bias = _k_scales(b)
    qs = b[:, 16:].reshape(-1, 4, 32)  # 4 chunks of 64 values: low nibbles, then high
    q = np.stack([qs & np.uint8(0x0F), qs >> np.uint8(4)], axis=2).reshape(-1, 256)
    return q, scale, bias


def _q5_k(b: np.ndarray):
    scale, bias = _k_scales(b)
    qh = _bits_of(b[:, 16:48], 256).reshape(-1, 32, 8)  # bit j of byte i: value 32j + i
    qh = qh.transpose(0, 2, 1).reshape(-1, 256)
    qs = b[:, 48:].reshape(-1, 4, 32)
    ql = np.stack([qs & np.uint8(0x0F), qs >> np.uint8(4)], axis=2).reshape(-1, 256)
    return ql | (qh << np.uint8(4)), scale, bias


def _q6_k(b: np.ndarray):
    ql = b[:, :128].reshape(-1, 2, 2, 32)  # two halves of 128; 64 bytes each
    qh = b[:, 128:192].reshape(-1, 2, 1, 32)
    sc = b[:, 192:208].view(np.int8).astype(np.float32)
    d = _f16(b[:, 208:210])
    lo = np.concatenate([ql & np.uint8(0x0F), ql >> np.uint8(4)], axis=2)  # (nb, 2, 4, 32)
    hi = (qh >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)) & np.uint8(3)
    q = (lo | (hi << np.uint8(4))).reshape(-1, 256)
    scale = d * sc
    return q, scale, scale * np.float32(-32)


def _q2_k(b: np.ndarray):
    sc = b[:, :16]
    qs = b[:, 16:80].reshape(-1, 2, 1, 32)
    d, dmin = _f16(b[:, 80:82]), _f16(b[:, 82:84])
    q = (qs >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)) & np.uint8(3)
    scale = d * (sc & np.uint8(0x0F)).astype(np.float32)
    bias = -(dmin * (sc >> np.uint8(4)).astype(np.float32))
    return q.reshape(-1, 256), scale, bias


def _q3_k_scales(raw: np.ndarray) -> np.ndarray:
    low = np.concatenate([raw[:, :8] & np.uint8(0x0F), raw[:, :8] >> np.uint8(4)], axis=-1)
    high = (raw[:, 8:12].reshape(-1, 1, 4)
            >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 4, 1)) & np.uint8(3)
    return (low | (high.reshape(-1, 16) << np.uint8(4))).astype(np.int16) - 32  # (nb, 16)


def _q3_k(b: np.ndarray):
    hmask = _bits_of(b[:, :32], 256).reshape(-1, 32, 8).transpose(0, 2, 1)  # (nb, 8, 32)
    qs = b[:, 32:96].reshape(-1, 2, 1, 32)
    ql = (qs >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)) & np.uint8(3)
    q = ql.reshape(-1, 8, 32).astype(np.int16) - 4 * (1 - hmask.astype(np.int16))
    sc = _q3_k_scales(b[:, 96:108])  # one per 16 values
    v = q.reshape(-1, 16, 16) * sc[:, :, None]  # in [-124, 128]
    d = _f16(b[:, 108:110])
    return (v.reshape(-1, 256) + 124).astype(np.uint8), \
        np.repeat(d, 8, axis=1), np.repeat(d * np.float32(-124), 8, axis=1)


_KVALUES = np.array(IQ4_NL.kvalues, dtype=np.int16) + 128  # as unsigned bytes


def _iq4_nl(b: np.ndarray):
    d = _f16(b[:, :2])
    return _KVALUES[_nibbles(b[:, 2:], 32)].astype(np.uint8), d, d * np.float32(-128)


def _iq4_xs(b: np.ndarray):
    d = _f16(b[:, :2])
    sh = np.ascontiguousarray(b[:, 2:4]).view(np.uint16)
    sl = b[:, 4:8]
    low = np.stack([sl & np.uint8(0x0F), sl >> np.uint8(4)], axis=-1).reshape(-1, 8)
    high = ((sh >> np.arange(0, 16, 2, dtype=np.uint16)) & np.uint16(3)).astype(np.uint8)
    ls = (low | (high << np.uint8(4))).astype(np.float32) - np.float32(32)
    qs = b[:, 8:].reshape(-1, 8, 16)
    q = np.concatenate([qs & np.uint8(0x0F), qs >> np.uint8(4)], axis=-1).reshape(-1, 256)
    scale = d * ls
    return _KVALUES[q].astype(np.uint8), scale, scale * np.float32(-128)


_MXFP4_VALUES = np.array(MXFP4.kvalues, dtype=np.int16) + 128  # doubled e2m1, unsigned


def _mxfp4(b: np.ndarray):
    d = MXFP4.e8m0_to_fp32_half(np.ascontiguousarray(b[:, :1]))
    return _MXFP4_VALUES[_nibbles(b[:, 1:], 32)].astype(np.uint8), d, d * np.float32(-128)


_CONVERTERS = {
    T.Q4_0: (_q4_0, TypeForm(32, 4)),
    T.Q4_1: (_q4_1, TypeForm(32, 4)),
    T.Q4_K: (_q4_k, TypeForm(32, 4)),
    T.Q5_0: (_q5_0, TypeForm(32, 8)),
    T.Q5_1: (_q5_1, TypeForm(32, 8)),
    T.Q5_K: (_q5_k, TypeForm(32, 8)),
    T.Q8_0: (_q8_0, TypeForm(32, 8)),
    T.Q3_K: (_q3_k, TypeForm(32, 8)),
    T.IQ4_NL: (_iq4_nl, TypeForm(32, 8)),
    T.IQ4_XS: (_iq4_xs, TypeForm(32, 8)),
    T.MXFP4: (_mxfp4, TypeForm(32, 8)),
    T.Q6_K: (_q6_k, TypeForm(16, 8)),
    T.Q2_K: (_q2_k, TypeForm(16, 4)),
}
AFFINE_TYPES = frozenset(_CONVERTERS)


def type_form(kind: GGMLQuantizationType) -> TypeForm | None:
    """The affine form of a quantized type; None for floats and types without one."""
    entry = _CONVERTERS.get(kind)
    return entry[1] if entry else None


def bits_per_weight(kind: GGMLQuantizationType) -> float:
    """What a weight of this type costs in the file."""
    block, size = GGML_QUANT_SIZES[kind]
    return size * 8 / block


def held_bits_per_weight(kind: GGMLQuantizationType, scale_bytes: int = 4) -> float:
    """What a weight costs as the engine holds it (q plus a scale and a bias a group)."""
    form = type_form(kind)
    if form is None:
        return 32.0 if kind in FLOAT_TYPES else bits_per_weight(kind)
    return form.bits + 2 * scale_bytes * 8 / form.group


def to_affine(data: np.ndarray, kind: GGMLQuantizationType,
              native: bool | None = None) -> AffineTensor:
    """Raw blocks (..., N, bytes per row) uint8 of a quantized tensor as an AffineTensor:
    through the engine's native decoder where it is built (engine/native/src/ggml_decode.cpp,
    the same bits, ~10x faster), else numpy. `native`: force either (tests compare them)."""
    entry = _CONVERTERS.get(kind)
    if entry is None:
        raise UnsupportedTensorType(f"GGML type {kind.name} has no affine form")
    convert, form = entry
    block, size = GGML_QUANT_SIZES[kind]
    shape = data.shape[:-1]
    k = data.shape[-1] // size * block
    groups = k // form.group
    decoder = _native_decoder() if native is not False else None
    if native and decoder is None:
        raise RuntimeError("engine.native is not built")
    if decoder is not None:
        rows = int(np.prod(shape))
        packed = np.empty((*shape, k * form.bits // 32), dtype=np.uint32)
        scales = np.empty((*shape, groups), dtype=np.float32)
        biases = np.empty_like(scales)
        decoder(int(kind), np.ascontiguousarray(data).reshape(-1), rows, k,
                packed.view(np.uint8).reshape(-1), scales.reshape(-1), biases.reshape(-1))
        return AffineTensor(packed, scales, biases, form.group, form.bits)
    rows2d = data.reshape(-1, data.shape[-1])
    blocks = rows2d.reshape(-1, size)
    q, scales, biases = convert(blocks)
    return AffineTensor(
        packed=pack(q.reshape(*shape, k), form.bits),
        scales=np.ascontiguousarray(scales, dtype=np.float32).reshape(*shape, groups),
        biases=np.ascontiguousarray(biases, dtype=np.float32).reshape(*shape, groups),
        group=form.group, bits=form.bits)


def _native_decoder():
    """engine.native's ggml_to_affine, or None where the extension is not built (any
    backend: decoding runs on the CPU whatever runs the model)."""
    from .. import native

    return native.built_function("ggml_to_affine")


def to_float32(data: np.ndarray, kind: GGMLQuantizationType) -> np.ndarray:
    """Any tensor as float32 through gguf-py (the reference every form is checked against)."""
    if kind == T.F32:
        return np.asarray(data, dtype=np.float32)
    return dequantize(data, kind)
