"""DeepStack (Qwen3-VL): features of the vision tower's middle layers added to the hidden
states of the text model's first layers at the image's tokens.

mlx-vlm's `get_input_embeddings` gives, beside the merged input rows, one array of image
features a level (`deepstack_visual_embeds`, the image tokens' rows) and where the image
tokens are. `stacked` lays each level out as the prompt's rows (zeros at its text tokens,
so adding them there changes nothing), and `StackedRows` keeps them with the input rows, so
a prompt chunk's slice carries its levels' rows too (Sequence.chunk_embeddings). The
engine's text model's first layers are `install`ed as classes that add their level's rows,
read from the model's PositionFeed, after the layer; an image request's chunks are always
a pass of their own (engine/vision/mrope.py: Qwen3-VL is M-RoPE as well), and every other
pass feeds none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from ..module_tree import adopt
from .mrope import PositionFeed


@dataclass(frozen=True, slots=True)
class StackedRows:
    """A prompt's input rows (tokens, hidden) and each DeepStack level's (tokens, hidden)."""

    rows: mx.array
    levels: tuple[mx.array, ...]

    def __getitem__(self, span: slice) -> StackedRows:
        return StackedRows(self.rows[span], tuple(level[span] for level in self.levels))

    def __len__(self) -> int:
        return self.rows.shape[0]


def stacked(inputs_embeds: mx.array, got: Any) -> mx.array | StackedRows:
    """The prompt's rows from mlx-vlm's get_input_embeddings result `got` (its batch of
    one, (tokens, hidden)), with the DeepStack levels laid out as the prompt's rows where
    it has any."""
    levels = getattr(got, "deepstack_visual_embeds", None)
    where = getattr(got, "visual_pos_masks", None)
    if not levels or where is None:
        return inputs_embeds
    at = mx.array([i for i, seen in enumerate(mx.array(where).reshape(-1).tolist()) if seen],
                  dtype=mx.uint32)
    zeros = mx.zeros(inputs_embeds.shape, dtype=inputs_embeds.dtype)
    laid = tuple(zeros.at[at].add(level.astype(inputs_embeds.dtype)) for level in levels)
    mx.eval(laid)
    return StackedRows(inputs_embeds, laid)


def install(model: nn.Module, feed: PositionFeed, levels: int) -> None:
    """Make the first `levels` layers of `model`'s text model add their DeepStack level's
    rows (fed for one pass through `feed`) to their output; the layers' weights and names
    are unchanged."""
    layers = model.model.layers
    for index in range(min(levels, len(layers))):
        layers[index] = adopt(layers[index], _stacking(type(layers[index])))
        object.__setattr__(layers[index], "deepstack", (feed, index))


_MADE: dict[type, type] = {}


def _stacking(stock: type) -> type:
    made = _MADE.get(stock)
    if made is None:
        def __call__(self, x: mx.array, *args: Any, **kwargs: Any) -> mx.array:
            out = stock.__call__(self, x, *args, **kwargs)
            feed, index = self.deepstack
            if feed.levels is not None:
                out = out + feed.levels[index][None]
            return out
        made = type(stock.__name__, (stock,), {
            "__call__": __call__, "__module__": __name__,
            "__doc__": f"{stock.__module__}.{stock.__name__}, then its DeepStack level"})
        _MADE[stock] = made
    return made
