"""The engine's unquantized linears: float32 weights on the native fixed-order product.

A GGUF's F32/F16/BF16 linears (widened to float32 on the CPU: engine/loader/gguf_weights.py)
and an mlx-lm directory's float weights are ``nn.Linear`` modules (and ``nn.Embedding``,
whose `as_linear` is a tied head). Their stock call is MLX's matmul, i.e. BLAS, which sums a
single row in another order than many rows (OpenBLAS: gemv against gemm kernels), so a
request's logits moved with its batch, its chunking and prefix-cache hits. With batch
invariance on (`CpuOptions.invariant`, the default) `engine_module` puts subclasses in the
engine's copy of the modules that run `native.float_matmul`: each output one sum in one
order, whatever the number of rows (src/float_matmul.h). Other dtypes (fp16/bf16 weights
kept with quantized=True) and other devices keep the stock call.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn

from ..cpu_options import CpuOptions
from ..module_tree import adopt
from . import float_matmul, simd


def _product(module: nn.Module, x: mx.array) -> mx.array | None:
    """x @ weight.T on the fixed-order kernel, or None where the stock call must run."""
    w = module["weight"]
    if x.dtype != mx.float32 or w.dtype != mx.float32 or not x.ndim:
        return None
    return float_matmul(x, w, force_scalar=module.__dict__.get("_scalar", False))


class NativeFloatLinear(nn.Linear):
    """nn.Linear (same arrays, same names) whose float32 product runs the native kernel."""

    def __call__(self, x: mx.array) -> mx.array:
        y = _product(self, x)
        if y is None:
            return super().__call__(x)
        return y + self["bias"] if "bias" in self else y


class NativeFloatEmbedding(nn.Embedding):
    """nn.Embedding whose `as_linear` (a tied output head) runs the native kernel; its
    lookup is the stock one."""

    def as_linear(self, x: mx.array) -> mx.array:
        y = _product(self, x)
        return super().as_linear(x) if y is None else y


_CLASSES: dict[type, type] = {nn.Linear: NativeFloatLinear, nn.Embedding: NativeFloatEmbedding}


def engine_module(mod: nn.Module, options: CpuOptions) -> nn.Module | None:
    """The engine's module for a plain float linear or embedding (exactly those classes:
    an architecture's own subclass keeps its call), or None."""
    cls = _CLASSES.get(type(mod))
    if cls is None or not options.invariant or mod["weight"].ndim != 2:
        return None
    new = adopt(mod, cls)
    object.__setattr__(new, "_scalar", options.scalar or not simd())
    return new
