"""Gemma 4: the input rows an image request feeds are those its language model adds up.

Gemma 4's text model scales its looked-up embeddings by sqrt(hidden) first thing. mlx-vlm's
merge (`get_input_embeddings`) does that scaling itself for the text tokens and puts the
image features in unscaled, and its language model takes rows so given as they are;
mlx-lm's class scales whatever it is given. `install` makes the engine's text model take
fed rows as they are (scale 1 for that call: x * 1.0 is x, bit for bit), and gives it
`input_rows`, the scaled rows of token ids, which the runner uses for the text segments of
a pass that feeds an image chunk's rows (ModelRunner._rows_fed). A text-only pass is
mlx-lm's own, unchanged.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn

from ..module_tree import adopt

# the VLM families whose language model takes mlx-vlm's merged rows unscaled
FAMILIES = ("gemma4",)


def install(model: nn.Module, model_type: str | None) -> None:
    """Make `model` (the engine's text model of a VLM of `model_type`, built by the loader,
    not mlx-lm's module) take fed rows as they are, for the families that need it."""
    if model_type in FAMILIES:
        model.model = adopt(model.model, _taking_rows(type(model.model)))


_MADE: dict[type, type] = {}


def _taking_rows(stock: type) -> type:
    made = _MADE.get(stock)
    if made is None:
        def __call__(self: Any, inputs: mx.array | None = None, cache: Any = None,
                     input_embeddings: mx.array | None = None, **kwargs: Any) -> mx.array:
            if input_embeddings is None:
                return stock.__call__(self, inputs, cache=cache, **kwargs)
            scale = self.embed_scale
            self.embed_scale = 1.0  # the rows fed are scaled already (mlx-vlm's merge)
            try:
                return stock.__call__(self, inputs, cache=cache,
                                      input_embeddings=input_embeddings, **kwargs)
            finally:
                self.embed_scale = scale

        def input_rows(self: Any, ids: mx.array) -> mx.array:
            """The rows mlx-vlm's merge gives text token `ids`: looked up, then scaled."""
            return self.embed_tokens(ids) * self.embed_scale

        made = type(stock.__name__, (stock,), {
            "__call__": __call__, "input_rows": input_rows, "__module__": __name__,
            "__doc__": f"{stock.__module__}.{stock.__name__}, taking fed rows unscaled"})
        _MADE[stock] = made
    return made
