"""KV cache moves: a solo sequence's cache into the batch, and back out.

Each cache is mlx-lm's per-layer list; the batch form is its batch class (BatchKVCache for
llama), whose merge / extend / filter / extract we reuse, so nothing is recomputed.
"""

from __future__ import annotations

from typing import Any

import mlx.nn as nn
from mlx_lm.models.cache import make_prompt_cache

LayerCaches = list[Any]


def new_cache(model: nn.Module) -> LayerCaches:
    return make_prompt_cache(model)


def merge(caches: list[LayerCaches]) -> LayerCaches:
    """Batch several solo caches (left-padded to a common length), in the given order."""
    return [type(layers[0]).merge(list(layers)) for layers in zip(*caches, strict=True)]


def extend(batch: LayerCaches, caches: list[LayerCaches]) -> None:
    """Append solo caches as new rows at the end of `batch`, in place."""
    for layer, incoming in zip(batch, merge(caches), strict=True):
        layer.extend(incoming)


def keep_rows(batch: LayerCaches, rows: list[int]) -> None:
    """Drop every row not in `rows`, in place (and trim the shared left padding)."""
    for layer in batch:
        layer.filter(rows)


def extract(batch: LayerCaches, row: int) -> LayerCaches:
    """One row as a solo cache, padding removed."""
    return [layer.extract(row) for layer in batch]
