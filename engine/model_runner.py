"""The model's calls: prefill chunks (one sequence, or several in one pass) and a decode step."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn

from . import cache as kv
from .cache import LayerCaches


class ModelRunner:
    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def prefill(self, cache: LayerCaches, tokens: list[int]) -> None:
        """Run prompt tokens into `cache`; their logits are never needed, so never computed."""
        self.model(mx.array(tokens)[None], cache=cache)
        mx.eval([layer.state for layer in cache])

    def prefill_many(self, caches: list[LayerCaches], chunks: list[list[int]]) -> list[LayerCaches]:
        """Run several sequences' chunks in one forward pass; return their updated caches.

        A pass costs a read of all the weights however few tokens it has, so a burst of
        prompts shares one. Chunks are right-padded to the longest and the cache is
        left-padded to the longest history (mlx-lm's BatchKVCache prepare/finalize): padding
        is masked out of attention and dropped when each row is extracted.
        """
        batch = kv.merge(caches)
        width = max(len(c) for c in chunks)
        right = [width - len(c) for c in chunks]
        for layer in batch:
            layer.prepare(right_padding=right)
        self.model(mx.array([c + [0] * r for c, r in zip(chunks, right, strict=True)]),
                   cache=batch)
        for layer in batch:
            layer.finalize()
        rows = [kv.extract(batch, i) for i in range(len(chunks))]
        mx.eval([layer.state for row in rows for layer in row])
        return rows

    def decode(self, cache: LayerCaches, tokens: list[int]) -> mx.array:
        """One step for every row of `cache`: logits of shape (rows, vocab), not yet evaluated."""
        return self.model(mx.array(tokens)[:, None], cache=cache)[:, -1, :]
