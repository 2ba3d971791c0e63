"""The masks of a prefill chunk holding whole images whose tokens attend both ways
(Gemma 4 with use_bidirectional_attention "vision"; why and which layers: image_blocks.py).

`install` makes the engine's text model (mlx-lm's gemma4_text, taking fed rows as they are:
scaled_rows.py) lay the chunk's image blocks over each layer type's mask, as mlx-vlm's
`_make_masks` does: the causal (or sliding-window) mask made an array where it was
"causal", then a block's tokens allowed to see each other. `attending` says which blocks a
pass holds (ModelRunner.prefill); every other pass, a decode step or a text chunk, gets
mlx-lm's own masks.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.base import create_causal_mask

from ..module_tree import adopt
from .image_blocks import Block


def install(model: nn.Module) -> None:
    """Make `model`'s inner model (built by the loader) lay image blocks over its masks."""
    model.model = adopt(model.model, _overlaying(type(model.model)))
    model.model.image_blocks = ()


@contextmanager
def attending(model: nn.Module, found: Sequence[Block]) -> Iterator[None]:
    """The passes inside hold the chunk's image blocks `found` (relative to the chunk)."""
    inner = model.model
    inner.image_blocks = tuple(found)
    try:
        yield
    finally:
        inner.image_blocks = ()


def overlaid(mask: Any, n: int, offset: int, window: int | None,
             found: Sequence[Block]) -> mx.array:
    """A layer's mask for a chunk of `n` queries at `offset` (its keys the `offset`
    before it, then its own) with the chunk's blocks allowed both ways."""
    if not isinstance(mask, mx.array):  # "causal" or None: made as mlx-vlm makes it
        mask = create_causal_mask(n, offset, window_size=window)
    ids = [-1] * n
    for b, (lo, hi) in enumerate(found):
        ids[lo:hi] = [b] * (hi - lo)
    block = mx.array(ids)
    same = (block[:, None] == block[None, :]) & (block[:, None] >= 0)
    cols = mask.shape[-1]
    same = mx.concatenate([mx.zeros((n, cols - n), dtype=mx.bool_), same], axis=1)
    if mask.dtype == mx.bool_:
        return mask | same
    return mx.where(same, mx.zeros_like(mask), mask)  # an additive mask: 0 is allowed


_MADE: dict[type, type] = {}


def _overlaying(stock: type) -> type:
    made = _MADE.get(stock)
    if made is None:
        def _make_masks(self: Any, h: mx.array, cache: list[Any]) -> list[Any]:
            masks = stock._make_masks(self, h, cache)
            found, n = self.image_blocks, h.shape[1]
            if not found or n < 2:
                return masks
            by_type: dict[str, Any] = {}
            out = []
            for layer, c, mask in zip(self.layers, cache, masks, strict=True):
                kind = layer.layer_type
                if kind not in by_type:
                    window = self.window_size if kind == "sliding_attention" else None
                    offset = int(c.offset) if c is not None else 0
                    by_type[kind] = overlaid(mask, n, offset, window, found)
                out.append(by_type[kind])
            return out

        made = type(stock.__name__, (stock,), {
            "_make_masks": _make_masks, "__module__": __name__,
            "__doc__": f"{stock.__module__}.{stock.__name__}, images' tokens both ways"})
        _MADE[stock] = made
    return made
