"""Quantized layers for groups of 16 (GGUF's Q6_K and Q2_K), which MLX's own cannot hold.

MLX's affine quantization takes groups of 32 or more; Q6_K and Q2_K give every 16 weights a
scale of their own (engine/loader/ggml_types.py). These modules hold such a weight exactly
as MLX's quantized layers hold theirs (``weight`` uint32, ``scales``, ``biases``) and compute
with the weight dequantized in MLX ops, exactly as gguf-py does. On the CPU the engine's
packed kernel takes them instead (engine/native/layers.py); elsewhere the loader turns
them into MLX's 8-bit groups of 32 (gguf.py).
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn

GROUP = 16


def dequantize_groups(w: mx.array, scales: mx.array, biases: mx.array, group_size: int,
                      bits: int) -> mx.array:
    """MLX's affine layout, any group size, as float32: scale * q + bias per group."""
    shifts = mx.arange(0, 32, bits, dtype=mx.uint32)
    q = (w[..., None] >> shifts) & mx.array((1 << bits) - 1, dtype=mx.uint32)
    k = w.shape[-1] * 32 // bits
    q = q.reshape(*w.shape[:-1], k // group_size, group_size).astype(mx.float32)
    out = q * scales[..., None].astype(mx.float32) + biases[..., None].astype(mx.float32)
    return out.reshape(*w.shape[:-1], k)


class _Group16(nn.Module):
    mode = "affine"
    group_size = GROUP

    def __init__(self, weight: mx.array, scales: mx.array, biases: mx.array, bits: int,
                 bias: mx.array | None = None) -> None:
        super().__init__()
        self.weight, self.scales, self.biases = weight, scales, biases
        if bias is not None:
            self.bias = bias
        self.bits = bits
        self.freeze()

    def dequantized(self) -> mx.array:
        return dequantize_groups(self["weight"], self["scales"], self["biases"], GROUP,
                                 self.bits)


class Group16Linear(_Group16):
    """nn.QuantizedLinear's arrays and call, with groups of 16."""

    def __call__(self, x: mx.array) -> mx.array:
        y = x @ self.dequantized().astype(x.dtype).T
        return y + self["bias"] if "bias" in self else y


class Group16Embedding(_Group16):
    """nn.QuantizedEmbedding's arrays, lookup and as_linear, with groups of 16."""

    def __init__(self, weight: mx.array, scales: mx.array, biases: mx.array,
                 bits: int) -> None:
        super().__init__(weight, scales, biases, bits)
        self.num_embeddings = weight.shape[0]
        self.dims = weight.shape[1] * 32 // bits

    def __call__(self, x: mx.array) -> mx.array:
        return dequantize_groups(self["weight"][x], self["scales"][x], self["biases"][x],
                                 GROUP, self.bits)

    def as_linear(self, x: mx.array) -> mx.array:
        return x @ self.dequantized().astype(x.dtype).T


class Group16SwitchLinear(_Group16):
    """mlx-lm's QuantizedSwitchLinear (stacked experts) with groups of 16."""

    def __call__(self, x: mx.array, indices: mx.array, sorted_indices: bool = False) -> mx.array:
        w = self.dequantized().astype(x.dtype)
        y = mx.gather_mm(x, w.swapaxes(-1, -2), rhs_indices=indices,
                         sorted_indices=sorted_indices)
        if "bias" in self:
            y = y + mx.expand_dims(self["bias"][indices], -2)
        return y
