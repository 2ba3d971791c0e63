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
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn

PANEL = 16  # rows a panel (kPanel in packed.h)
ATTR = "_batchchat_prepacked"  # the module attribute that holds a Prepacked


@dataclass(frozen=True, eq=False)
class Prepacked:
    """pack_quantized's triple for a module's weight, made by the loader."""

    weight: mx.array  # uint8 (panels * 16, K * bits / 8)
    scales: mx.array  # float32 (panels, K / group, 16)
    biases: mx.array

    def arrays(self) -> list[mx.array]:
        return [self.weight, self.scales, self.biases]


def _rows(x: mx.array, n: int) -> mx.array:
    """(panels, G, 16) → (n, G): a panel's lanes back to rows."""
    p, g, _ = x.shape
    return x.transpose(0, 2, 1).reshape(p * PANEL, g)[:n]


def affine_views(pk: Prepacked, n: int, bits: int, scale_dtype: mx.Dtype
                 ) -> tuple[mx.array, mx.array, mx.array]:
    """MLX's affine (weight uint32 (n, K * bits / 32), scales, biases (n, K / group)) as
    unevaluated views of the packed arrays: nothing is computed until someone evaluates
    them. Layout (packed.h): per panel and 32-block, 8-bit: byte 64j + 4·lane + i holds
    q[4j + i]; 4-bit: byte 64j + 4·lane + i holds q[8j + i] low, q[8j + 4 + i] high."""
    w = pk.weight
    rows, width = w.shape
    k = width * 8 // bits
    panels, blocks = rows // PANEL, k // 32
    if bits == 8:
        q = w.reshape(panels, blocks, 8, PANEL, 4).transpose(0, 3, 1, 2, 4)
        q = q.reshape(panels * PANEL, k)[:n]
    else:
        b = w.reshape(panels, blocks, 4, 1, PANEL, 4)
        nib = mx.concatenate([b & 0x0F, b >> 4], axis=3)  # (P, blocks, j, half, lane, i)
        v = nib.transpose(0, 4, 1, 2, 3, 5).reshape(panels * PANEL, k // 2, 2)[:n]
        q = v[..., 0] | (v[..., 1] << 4)  # two values a byte, the lower index low
    weight = mx.view(mx.contiguous(q), mx.uint32)
    return (weight, _rows(pk.scales, n).astype(scale_dtype),
            _rows(pk.biases, n).astype(scale_dtype))


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
    k = width * 8 // bits
    panels, blocks = rows // PANEL, k // 32
    if bits == 8:
        q = _lanes(w.reshape(panels, blocks, 8, PANEL, 4).transpose(0, 3, 1, 2, 4), ids)
        q = q.reshape(*ids.shape, k)
    else:
        b = _lanes(w.reshape(panels, blocks, 4, PANEL, 4).transpose(0, 3, 1, 2, 4), ids)
        b = mx.expand_dims(b, -2)  # (..., blocks, j, 1, i)
        v = mx.concatenate([b & 0x0F, b >> 4], axis=-2).reshape(*ids.shape, k // 2, 2)
        q = v[..., 0] | (v[..., 1] << 4)
    weight = mx.view(mx.contiguous(q), mx.uint32)
    s, b_ = (_lanes(x.transpose(0, 2, 1), ids).astype(scale_dtype)
             for x in (pk.scales, pk.biases))
    return weight, s, b_


def attach(module: nn.Module, pk: Prepacked) -> None:
    """Hands `pk` to the engine with the module (a plain attribute: not a parameter, so the
    module's parameters, names and class are mlx-lm's own)."""
    object.__setattr__(module, ATTR, pk)


def prepacked(module: nn.Module) -> Prepacked | None:
    """The packed triple the loader made for this module, if any."""
    return getattr(module, ATTR, None)
