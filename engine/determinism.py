"""The same request gives the same answer (issue #25, docs/determinism.md).

On the CPU backend with the native kernels, every position's logits are computed by one
arithmetic whatever shares its forward pass: the quantized linears take every row count
on the same kernel (no switch to dequantize + BLAS for big passes), and attention runs the
tiled kernel for any number of query positions, its key tiles starting at each row's first
visible key (so left padding, chunking and the cache's length change nothing). A greedy or
seeded request then answers the same alone, in any batch, chunked any way, and from the
prefix cache.

`CpuOptions.invariant = False` (BATCHCHAT_INVARIANT=0) restores the previous choice of
kernels by pass size (kept for measuring what invariance costs; the answers then depend on
what else runs).
"""

from __future__ import annotations

from .cpu_options import CpuOptions


def describe(options: CpuOptions) -> str:
    """One line for the About box: whether an engine with these CPU options gives the same
    answer in any batch (docs/determinism.md). Never imports MLX itself."""
    import sys

    mx = sys.modules.get("mlx.core")
    if mx is None:
        return "not known until a model is loaded (docs/determinism.md)"
    if mx.default_device() != mx.cpu:
        return ("not across batches on this GPU backend; the CPU backend guarantees it "
                "(docs/determinism.md)")
    from . import native

    if not (options.invariant and options.native and native.available()):
        return "off (BATCHCHAT_INVARIANT=0 or no native kernels; docs/determinism.md)"
    return ("on: a quantized model's greedy and seeded replies are bitwise the same in any "
            "batch, chunking or cache hit (docs/determinism.md)")
