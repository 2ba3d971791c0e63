"""KV cache moves: a solo sequence's cache into a batch, and back out.

Each cache is mlx-lm's per-layer list. The decode batch keeps plain KV caches as rows of
engine.slot_cache (joining or leaving copies only those rows); other cache kinds, and
prefill passes over several prompts, use mlx-lm's batch class (BatchKVCache for llama),
whose merge / extend / filter / extract we reuse, so nothing is recomputed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import KVCache, RotatingKVCache, make_prompt_cache

from .kv_arena import ArenaKVCache
from .slot_cache import EVAL_NOW_BYTES, RowIndex, SlotKVCache, supports

LayerCaches = list[Any]


def new_cache(model: nn.Module) -> LayerCaches:
    """The model's per-layer caches, a sliding-window layer's (Gemma 3, gpt-oss) as a plain
    KVCache: mlx-lm's rotating cache lays a batch out otherwise than a lone row (the
    attention's sums then run in another order), while over a plain cache the model's own
    window mask gives every row the bits it gets alone (the same-answer guarantee). It
    keeps the layer's whole history, as llama.cpp's --swa-full does."""
    return [KVCache() if isinstance(c, RotatingKVCache) else c
            for c in make_prompt_cache(model)]


def windowed(model: nn.Module) -> bool:
    """Whether some layer attends over a sliding window (its mask, not its cache, says so:
    passes that build masks of their own must not run such a model)."""
    return any(isinstance(c, RotatingKVCache) for c in make_prompt_cache(model))


def fixed_state(model: nn.Module) -> bool:
    """Whether some layer keeps a state that cannot be cut back to an earlier position: a
    hybrid model's recurrent layers (Qwen 3.5's Gated DeltaNet: mlx-lm's ArraysCache, a
    convolution's last inputs and a state matrix a head, the same size at any length).
    Such a model runs without what needs a shorter cache: drafts to take back (off) and
    prefixes cut from a longer entry (its prefix cache reuses entries only whole:
    engine_core.py, PrefixCache(whole_entries=True))."""
    return any(not c.is_trimmable() for c in new_cache(model))


def size_for(cache: LayerCaches, positions: int, gave_way: bool = False) -> None:
    """Room for `positions` in all (a prompt and its reply's room) in each plain KV layer,
    instead of mlx-lm's 256 at a time: a prompt's chunks then write into one buffer (each
    growth copied all it held), and the buffer that stays the prompt's cached entry has room
    for the reply's positions (PrefixCache.extend). `fit_growth` puts mlx-lm's step back
    once the prompt is in.

    A new layer grows by that much at its first write, and so does a layer restored as
    views of a cached prefix, unless that prefix `gave_way` (evicted for this request's
    set-aside, its views its only holders) and is long (EVAL_NOW_BYTES a layer): it is
    copied now into a buffer of its own that size (what its first write would make: the
    prefix, then zeros), a layer at a time, each evaluated before the next, so it goes a
    layer at a time, not whole beside the copy until the first chunk's pass ends. (Where
    the prefix stays cached, a copy now would free nothing and cost a sync a layer.)"""
    for layer in cache:
        if type(layer) is not KVCache or positions <= layer.offset:
            continue
        if (layer.keys is None or not gave_way
                or layer.keys.nbytes + layer.values.nbytes < EVAL_NOW_BYTES):
            layer.step = positions - layer.offset  # (mlx-lm reads self.step when it grows)
            continue
        n = layer.offset
        room = [mx.zeros((*a.shape[:2], positions - n, a.shape[3]), a.dtype)
                for a in (layer.keys, layer.values)]
        layer.keys = mx.concatenate([layer.keys[..., :n, :], room[0]], axis=2)
        layer.values = mx.concatenate([layer.values[..., :n, :], room[1]], axis=2)
        mx.eval(layer.keys, layer.values)


def fit_growth(cache: LayerCaches) -> None:
    """mlx-lm's own growth step again (`size_for`): a row decoding alone grows 256 at a
    time, not by a prompt's length."""
    for layer in cache:
        if type(layer) is KVCache:
            layer.__dict__.pop("step", None)


def merge(caches: list[LayerCaches]) -> LayerCaches:
    """Batch several solo caches (left-padded to a common length), in the given order."""
    return [type(layers[0]).merge(list(layers)) for layers in zip(*caches, strict=True)]


def start_batch(caches: list[LayerCaches], rows: int = 0,
                reuse: LayerCaches | None = None, allow_native: bool = True,
                arena: bool = False, room: int | None = None,
                hand_over: bool = False) -> LayerCaches:
    """A decode batch of these solo caches, one row each, in order; with room for `rows`
    rows where the batch kind has room to make. `reuse`: an emptied batch cache whose
    buffers to write into rather than allocate. `allow_native`: the slot rows may be
    written by engine.native's op (the engine's CpuOptions.native). `arena`: the rows as
    column ranges of one arena per layer (engine/kv_arena.py; native ops only). `room`:
    the bytes slot buffers may hold beyond their rows (`limit_slack`; None: no limit).
    `hand_over`: the solo caches are given up (`add_rows`)."""
    if arena and all(supports(c) for c in caches):
        if reuse is not None and isinstance(reuse[0], ArenaKVCache) and all(
                layer.fits(c) for layer, c in zip(reuse, caches[0], strict=True)):
            batch = reuse
            for layer in batch:
                layer.reset()
        else:
            index = RowIndex()
            batch = [ArenaKVCache.like(c, index) for c in caches[0]]
        add_rows(batch, caches, rows, hand_over=hand_over)
        return batch
    if all(supports(c) for c in caches):
        if reuse is not None and isinstance(reuse[0], SlotKVCache) and all(
                layer.fits(c) for layer, c in zip(reuse, caches[0], strict=True)):
            if room is not None:
                limit_slack(reuse, room)
            for i, layer in enumerate(reuse):
                layer.reset()
                layer.add([c[i] for c in caches], rows)
                _let_go(caches, i, layer, hand_over)
            if any(layer.over_slack() for layer in reuse):
                shrink(reuse)  # it fit the free room when kept; set-asides came since
            return reuse
        index = RowIndex()  # shared: every layer holds the same lengths
        each = None if room is None else slack_share(caches[0], room)
        batch = []
        for i in range(len(caches[0])):
            batch.append(SlotKVCache([c[i] for c in caches], rows, index, allow_native, each))
            _let_go(caches, i, batch[-1], hand_over)
        return batch
    return merge(caches)


def add_rows(batch: LayerCaches, caches: list[LayerCaches], rows: int = 0,
             hand_over: bool = False) -> None:
    """Append solo caches as new rows at the end of `batch`, in place (room for `rows`).
    `hand_over`: the solo caches are given up (a join: DecodeBatch.join); each layer of
    theirs is let go once its copy into the batch is made, so they go a layer at a time
    beside the batch's new buffers rather than whole after every layer's copy."""
    if isinstance(batch[0], ArenaKVCache):
        coming = max(0, rows - len(batch[0].rows) - len(caches))  # room made in one growth
        for i, layer in enumerate(batch):
            layer.add([c[i] for c in caches], coming=coming)
            _let_go(caches, i, layer, hand_over)
        return
    if isinstance(batch[0], SlotKVCache):
        for i, layer in enumerate(batch):
            before = layer.keys
            layer.add([c[i] for c in caches], rows)
            if layer.keys is not before:
                # It grew: its rows copied into a new buffer. Evaluated now, the old buffer
                # goes before the next layer's copy; left to the next pass, every layer's
                # old and new buffers could be live together (a 3-row batch of 4,000-token
                # rows joined by a fourth: 1,080 MiB at the peak against 918; issue #46).
                mx.eval(layer.keys, layer.values)
            _let_go(caches, i, layer, hand_over)
        return
    for layer, incoming in zip(batch, merge(caches), strict=True):
        layer.extend(incoming)


def _let_go(caches: list[LayerCaches], index: int, layer: Any, hand_over: bool) -> None:
    """With `hand_over`, layer `index` of each solo cache, now copied into the batch's
    `layer`, is let go: the copy is evaluated here where the layer holds EVAL_NOW_BYTES (a
    short one's is left to the next pass, which then lets it go). Held until every layer
    was copied, the joining prompts' KV stayed whole beside the batch's new buffers: the
    window's highest MLX peak, two long prompts joining a 4-row batch (1,114 MiB against
    861 after; issue #46 item 14). A cached prefix aliasing them keeps its own objects."""
    if hand_over:
        if sum(c[index].nbytes for c in caches) >= EVAL_NOW_BYTES:
            mx.eval(*layer.state)
        for cache in caches:
            cache[index] = None


def keep_rows(batch: LayerCaches, rows: list[int]) -> list[int]:
    """Drop every row not in `rows` (ascending), in place. Returns the rows' new order:
    position p now holds what was row order[p]."""
    if isinstance(batch[0], SlotKVCache | ArenaKVCache):
        orders = [layer.keep(rows) for layer in batch]
        return orders[0]
    kept = mx.array(rows)
    for layer in batch:
        layer.filter(kept)  # also trims the shared left padding
    return list(rows)


def shrink(batch: LayerCaches) -> None:
    """After rows left: a slot buffer much bigger than its rows need is cut to fit (the KV
    budget counts the rows' shares, not the buffer)."""
    if isinstance(batch[0], SlotKVCache):
        # a layer at a time: its old buffer goes before the next layer's new one is made
        # (all at once, every layer's old and new buffers were alive together)
        for layer in batch:
            if layer.shrink():
                mx.eval(layer.keys, layer.values)
    elif isinstance(batch[0], ArenaKVCache):
        for layer in batch:
            layer.arena.shrink()
        mx.eval([t for layer in batch for t in layer.state[:2]])


def limit_slack(batch: LayerCaches, room: int) -> None:
    """Slot buffers may hold at most `room` bytes beyond their rows in use, shared evenly
    by the layers (SlotKVCache.slack_bytes); other batch kinds keep their own rules."""
    if isinstance(batch[0], SlotKVCache):
        each = slack_share(batch, room)
        for layer in batch:
            layer.slack_bytes = each


def slack_share(batch: LayerCaches | list[Any], room: int) -> int:
    """One layer's share of `room`, the bytes a batch's buffers may hold beyond its rows."""
    return max(0, room) // len(batch)


def grow_ahead(batch: LayerCaches, room: Callable[[], int] | None = None) -> None:
    """Before a decode step: at most one layer's buffer grows, ahead of need. Growing copies
    a layer's rows, and all layers at once would be one long step (~100 ms for 16 rows of
    256 columns on a CPU), a gap every stream sees. `room`: the KV budget's free room as it
    is now, which the growth's empty rows stay within (`limit_slack`)."""
    if not isinstance(batch[0], SlotKVCache):
        return
    for layer in batch:
        if layer.spare_columns() <= len(batch) + 2:  # the last layer grows in time too
            if room is not None:
                layer.slack_bytes = slack_share(batch, room())
            layer.grow_columns()
            return


def extract(batch: LayerCaches, row: int, room: bool = False) -> LayerCaches:
    """One row as a solo cache, padding removed; `room`: slot rows' with spare columns to
    decode into (SlotKVCache.extract)."""
    if room and isinstance(batch[0], SlotKVCache | ArenaKVCache):
        return [layer.extract(row, room=True) for layer in batch]
    return [layer.extract(row) for layer in batch]
