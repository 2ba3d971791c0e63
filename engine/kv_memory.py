"""How much KV memory a token takes, and the default KV budget for this device."""

from __future__ import annotations

import os

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

from . import cache as kv

MIN_DEFAULT_BUDGET = 256 << 20


def bytes_per_token(model: nn.Module) -> int:
    """KV bytes one more token adds to a sequence's cache (all layers, keys and values),
    from the shapes a one-token forward pass leaves in a fresh cache."""
    probe = kv.new_cache(model)
    model(mx.array([[0]]), cache=probe)
    total = 0
    for layer in probe:
        for arr in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(arr, mx.array):  # (batch, heads, positions, dim)
                total += arr.shape[1] * arr.shape[3] * arr.dtype.size
    return max(total, 1)


def weights_bytes(model: nn.Module) -> int:
    return sum(v.nbytes for _, v in tree_flatten(model.parameters()))


def device_memory_bytes() -> int:
    """Memory the MLX device may use: Metal's recommended working set, the GPU's memory on
    CUDA, physical RAM on the CPU backend."""
    info = mx.device_info()
    for key in ("max_recommended_working_set_size", "memory_size", "total_memory"):
        value = info.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def default_budget(model: nn.Module) -> int:
    """A quarter of the device's memory, but never more than what the weights leave."""
    total = device_memory_bytes()
    return max(MIN_DEFAULT_BUDGET, min(total // 4, total - weights_bytes(model) - total // 4))
