"""Quantized KV (EngineConfig.kv_bits, issue #54): how a token's keys and values are stored.

Layout: each (token, head) row of D floats becomes one row of bytes, mlx's own affine
quantization (`mx.quantize`, as mlx-lm's QuantizedKVCache) laid end to end:

    [ D * bits / 8 bytes: the values, mx.quantize's uint32 words (little-endian) ]
    [ D / group float32 scales ][ D / group float32 biases ]      value = q * scale + bias

so a cache's keys are an ordinary (B, H, T, W) uint8 array: every KV move the engine makes
(slot rows, the prefix cache's slices, the native KV write, the disk store's files) works on
it unchanged, a position at a time. A row depends only on its own token's floats, so the
same-answer guarantee (batch, chunking, cache) holds as long as attention reads it the same
way on every path: on the CPU the native tiled kernel dequantizes a tile of rows into
scratch and runs its float math (`fused`); elsewhere (Metal, CUDA, a model whose attention
is its own) the rows are dequantized with `mx.dequantize` and attention runs on floats.

Bytes a head a token, D = 64: float32 256; 8 bits in groups of 64 (mlx-lm's default) 64 +
8 = 72 (3.6x fewer); 4 bits in groups of 32 (finer: measured, `for_head`) 32 + 16 = 48
(5.3x).

4 bits turn each row first (`turned`, tag "q4g32h"): the row times the orthonormal
Walsh-Hadamard matrix H (`mx.hadamard_transform`, one op on every backend, each row on its
own) is what is rounded, as llama.cpp does whenever its cache is quantized (attn_rot_k /
attn_rot_v). A few large channels of a key otherwise set every group's step; turned, the
row's energy is spread over all of them (on the bundled model 4-bit mean KL 0.08 -> 0.05,
docs/memory.md "KV bits"). H is symmetric and H @ H = I, so q . k = (qH) . (kH) and
sum p v = (sum p vH) H: the native kernel reads the turned rows with the query turned and
turns its output back (engine.native.cache_attention); `unpack` turns the rows back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx

SCALE_BYTES = 4  # scales and biases are float32, whatever the model's dtype


@dataclass(frozen=True, slots=True)
class KvPacking:
    bits: int  # 8 or 4
    group: int  # values a scale and bias
    turned: bool = False  # rows rounded times the Walsh-Hadamard matrix (the module's doc)

    @staticmethod
    def for_head(bits: int, head_dim: int) -> KvPacking:
        # 4 bits in groups of 32: on the bundled model's 2k-token text mean KL 0.093 against
        # 0.124 with groups of 64; 8 bits: no difference, so the smaller rows of 64
        # (docs/memory.md "KV bits")
        group = 64 if head_dim % 64 == 0 and bits == 8 else 32
        if head_dim % group or head_dim * bits % 32:
            raise ValueError(f"kv_bits={bits}: head size {head_dim} is not a multiple of 32")
        # 4 bits turned (a power-of-two head: H's plain form); 8 bits are at float16's
        # own noise either way (docs/memory.md "KV bits"), so left as they were
        return KvPacking(bits, group, turned=bits == 4 and head_dim & (head_dim - 1) == 0)

    def width(self, head_dim: int) -> int:
        """Bytes of one packed (token, head) row."""
        return head_dim * self.bits // 8 + 2 * SCALE_BYTES * (head_dim // self.group)

    def head_dim(self, width: int) -> int:
        """D of a packed row `width` bytes wide."""
        return width * 8 * self.group // (self.bits * self.group + 16 * SCALE_BYTES)

    def pack(self, x: mx.array, native: bool = False) -> mx.array:
        """(..., D) floats -> (..., width) uint8 rows. `native`: in one op of the native
        extension (CPU only; the same bytes, without mx.quantize's five ops a call)."""
        x = x.astype(mx.float32)
        if native:  # turned in the same op
            from . import native as ext

            return ext.kv_pack(x, self.bits, self.group, turn=self.turned)
        if self.turned:
            x = turn(x)
        w, scales, biases = mx.quantize(x, group_size=self.group, bits=self.bits)
        return mx.concatenate([w.view(mx.uint8), scales.view(mx.uint8),
                               biases.view(mx.uint8)], axis=-1)

    def unpack(self, packed: mx.array, dtype: Any = mx.float32) -> mx.array:
        """(..., width) uint8 rows -> (..., D) floats (mx.dequantize of the parts)."""
        d = self.head_dim(packed.shape[-1])
        nw, ns = d * self.bits // 8, SCALE_BYTES * (d // self.group)
        w = mx.contiguous(packed[..., :nw]).view(mx.uint32)
        scales = mx.contiguous(packed[..., nw:nw + ns]).view(mx.float32)
        biases = mx.contiguous(packed[..., nw + ns:]).view(mx.float32)
        out = mx.dequantize(w, scales, biases, group_size=self.group, bits=self.bits)
        if self.turned:
            out = turn(out)
        return out if dtype == mx.float32 else out.astype(dtype)

    @property
    def tag(self) -> str:
        """The form's name in a KV file's metadata (engine/prefix_store.py)."""
        return f"q{self.bits}g{self.group}" + ("h" if self.turned else "")

    @staticmethod
    def from_tag(tag: str) -> KvPacking | None:
        """The form a file's tag names; None for float ("" or "float")."""
        if not tag or tag == "float":
            return None
        turned = tag.endswith("h")
        bits, group = tag[1:len(tag) - turned].split("g")
        return KvPacking(int(bits), int(group), turned)

    def reads(self, tag: str) -> bool:
        """Whether a KV file of form `tag` loads into this form: its own, float (packed as
        it loads: the bytes a fresh prefill packs), or the same bits and group turned the
        other way (a 4-bit file from before the turn: unpacked and packed again, so not
        the bytes a fresh prefill gives)."""
        other = KvPacking.from_tag(tag)
        return other is None or (other.bits, other.group) == (self.bits, self.group)

    def repack(self, rows: mx.array, tag: str) -> mx.array:
        """Rows of a file of form `tag` (self.reads(tag)) in this form."""
        other = KvPacking.from_tag(tag)
        if other == self:
            return rows
        return self.pack(rows if other is None else other.unpack(rows))


def turn(x: mx.array) -> mx.array:
    """Each row (last axis, a power of two) times the orthonormal Walsh-Hadamard matrix, its
    own inverse (mx.hadamard_transform; an empty array, which it refuses, as it is)."""
    return mx.hadamard_transform(x) if x.size else x


def packed(keys: mx.array | None) -> bool:
    """Whether a cache's key array holds packed rows."""
    return keys is not None and keys.dtype == mx.uint8


class PackedLayer:
    """One layer's cache as the model sees it when KV is quantized: new keys and values are
    packed before they go into the cache below (mlx-lm's KVCache, a slot batch, a ragged
    pass's layer, a compiled step's), which keeps only packed rows. `fused`: attention
    reads the packed rows (the engine's dispatcher, the native kernel) and the native
    extension packs them; else mx.quantize packs them and attention gets them dequantized.
    Everything else is the cache below's (offset, masks, state)."""

    __slots__ = ("inner", "packing", "fused")

    def __init__(self, inner: Any, packing: KvPacking, fused: bool) -> None:
        self.inner, self.packing, self.fused = inner, packing, fused

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        fused = self.fused  # the native kernel reads the rows: the extension packs them too
        k, v = self.inner.update_and_fetch(self.packing.pack(keys, fused),
                                           self.packing.pack(values, fused))
        if self.fused:
            return k, v
        return self.packing.unpack(k, keys.dtype), self.packing.unpack(v, values.dtype)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def wrap(cache: list[Any], packing: KvPacking | None, fused: bool) -> list[Any]:
    """The model's view of `cache` (a list of layer caches) for one pass: each KV layer
    behind a PackedLayer when KV is quantized; the list itself when it is not (float)."""
    if packing is None:
        return cache
    return [PackedLayer(c, packing, fused) if hasattr(c, "update_and_fetch")
            and not hasattr(c, "cache") else c for c in cache]  # (ArraysCache: states)
