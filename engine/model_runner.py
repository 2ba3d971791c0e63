"""The model's two calls: a prefill chunk into one sequence's cache, and a decode step."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn

from .cache import LayerCaches


class ModelRunner:
    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def prefill(self, cache: LayerCaches, tokens: list[int]) -> None:
        """Run prompt tokens into `cache`; their logits are never needed, so never computed."""
        self.model(mx.array(tokens)[None], cache=cache)
        mx.eval([layer.state for layer in cache])

    def decode(self, cache: LayerCaches, tokens: list[int]) -> mx.array:
        """One step for every row of `cache`: logits of shape (rows, vocab), not yet evaluated."""
        return self.model(mx.array(tokens)[:, None], cache=cache)[:, -1, :]
