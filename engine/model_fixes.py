"""Where an mlx-lm module cannot take what a batch hands it, the engine's copy of the
model's modules gets a subclass that can (engine/module_tree.py: the loaded model and mlx-lm
stay untouched).

- gemma2's Attention (mlx-lm 0.32.2) reshapes its queries to (B, kv heads, repeats, L, D)
  but adds the batch's (B, 1, L, T) mask as it is, which cannot broadcast: every batched
  prompt of a Gemma 2 model failed. Its mask gets the repeats' axis.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn

from .module_tree import adopt, replace

_FIXED: dict[type, type] = {}


def _grouped_heads_mask(stock: type) -> type:
    if stock not in _FIXED:
        def __call__(self: Any, x: mx.array, mask: Any = None, cache: Any = None) -> mx.array:
            if isinstance(mask, mx.array) and mask.ndim == 4 and self.repeats > 1:
                mask = mask[:, :, None]
            return stock.__call__(self, x, mask=mask, cache=cache)

        _FIXED[stock] = type(stock.__name__, (stock,), {
            "__call__": __call__, "__module__": __name__,
            "__doc__": f"{stock.__module__}.{stock.__qualname__}, its mask given the "
                       "grouped heads' axis"})
    return _FIXED[stock]


def install(tree: nn.Module) -> int:
    """Fix the modules below `tree` (the engine's own copy) that need it; returns how many."""
    from mlx_lm.models import gemma2

    def fix(mod: nn.Module) -> nn.Module | None:
        if type(mod) is gemma2.Attention:
            return adopt(mod, _grouped_heads_mask(gemma2.Attention))
        return None

    return replace(tree, fix)
