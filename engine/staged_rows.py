"""A prompt prefilled straight into the slot row it will decode in (issue #47).

Before, a prompt was prefilled into its own mlx-lm `KVCache` per layer and copied into a
slot row of the decode batch when it joined: a copy of its whole KV in the tick it joined,
and its KV held twice from then on (the solo buffer stayed as the prompt's cached prefix).
Here an admitted prompt that will decode beside others gets a row of the batch's buffer
(`engine/slot_cache.py`) at once, past the decoding rows: its chunks write there, and
joining is bookkeeping (the row becomes the next decode row), not a copy.

`RowCache` is one layer's view of such a row in mlx-lm's cache interface (offset,
update_and_fetch, make_mask), so every prefill pass (one prompt, a ragged pass, a padded
pass of several) runs over it as over a `KVCache`. A `Row` is the row's index, shared by
the sequence's layers; it moves only when rows are re-placed (`place`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mlx.core as mx
from mlx_lm.models.cache import BatchKVCache, create_attention_mask

if TYPE_CHECKING:
    from .slot_cache import SlotKVCache


@dataclass(eq=False, slots=True)
class Row:
    """Where a staged prompt's KV is in the buffer of every layer."""

    index: int


class RowCache:
    """One layer's staged row: KV at columns [0, offset) of row `row.index` of `layer`'s
    buffer. Holds no array itself (the buffer is written in place: a reference kept here
    would make every write copy it)."""

    def __init__(self, layer: SlotKVCache, row: Row) -> None:
        self.layer = layer
        self.row = row
        self.offset = 0

    # -- mlx-lm's cache interface ---------------------------------------------------------
    def write(self, keys: mx.array, values: mx.array) -> None:
        """The chunk's keys (1, H, S, D) at columns offset .. offset + S of the row. A ragged
        pass writes every staged segment of a layer before the decode rows' write and
        before anyone reads the buffer (a view read between two writes would make the
        second copy the whole buffer)."""
        steps = keys.shape[2]
        self.layer.reserve_row(self.row.index, self.offset + steps + 1)
        r, a = self.row.index, self.offset
        self.layer.keys[r:r + 1, :, a:a + steps] = keys
        self.layer.values[r:r + 1, :, a:a + steps] = values
        self.offset += steps

    def fetch(self) -> tuple[mx.array, mx.array]:
        """The row's keys and values so far (views of the buffer)."""
        r, n = self.row.index, self.offset
        return self.layer.keys[r:r + 1, :, :n], self.layer.values[r:r + 1, :, :n]

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        self.write(keys, values)
        return self.fetch()

    def make_mask(self, *args: Any, **kwargs: Any) -> Any:
        return create_attention_mask(*args, offset=self.offset, **kwargs)

    # -- what a KVCache also answers (merge into a padded pass, eval, budget) ---------------
    @property
    def keys(self) -> mx.array:
        return self.layer.keys[self.row.index:self.row.index + 1]

    @property
    def values(self) -> mx.array:
        return self.layer.values[self.row.index:self.row.index + 1]

    @property
    def state(self) -> tuple[mx.array, mx.array]:
        return self.layer.keys, self.layer.values

    def size(self) -> int:
        return self.offset

    @classmethod
    def merge(cls, caches: list[Any]) -> Any:
        """Several prompts' rows in mlx-lm's padded batch (a prefill pass of several
        prompts where the ragged pass does not run: a copy in and out, as for KVCache)."""
        return BatchKVCache.merge(caches)

    def empty(self) -> bool:
        return self.offset == 0

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        n = min(self.offset, n)
        self.offset -= n
        return n

    @property
    def nbytes(self) -> int:
        return 0  # the buffer is the batch's (its share is the request's reservation)


def staged(cache: list[Any] | None) -> bool:
    """Whether a sequence's layer caches are a staged slot row."""
    return bool(cache) and isinstance(cache[0], RowCache)


def stage(pool: list[SlotKVCache], start: list[Any] | None, columns: int) -> list[RowCache]:
    """A new staged row in every layer of `pool`, with room for `columns` positions, holding
    `start`'s KV if given (a restored prefix: copied once into the row)."""
    row = Row(pool[0].free_row())
    out = []
    for layer in pool:
        cache = RowCache(layer, row)
        layer.staged.append(cache)
        layer.reserve_row(row.index, columns + 1)
        out.append(cache)
    if start is not None and start[0].offset:
        for cache, source in zip(out, start, strict=True):
            n = source.offset
            cache.write(source.keys[..., :n, :], source.values[..., :n, :])
        mx.eval([a for c in out for a in c.state])
    return out


def unstage(cache: list[RowCache]) -> None:
    """The row is no longer this sequence's (it left, or its KV moved elsewhere)."""
    for layer_cache in cache:
        if layer_cache in layer_cache.layer.staged:
            layer_cache.layer.staged.remove(layer_cache)


def extract(cache: list[RowCache], room: bool = False) -> list[Any]:
    """The staged row's KV as a solo mlx-lm cache of its own (a copy), and the row freed."""
    from mlx_lm.models.cache import KVCache

    out = []
    for layer_cache in cache:
        n, r = layer_cache.offset, layer_cache.row.index
        layer = layer_cache.layer
        solo = KVCache()
        if room:
            width = -(-(n + 1) // KVCache.step) * KVCache.step
            solo.keys = mx.zeros((1,) + layer.keys.shape[1:2] + (width,) + layer.keys.shape[3:],
                                 layer.keys.dtype)
            solo.values = mx.zeros((1,) + layer.values.shape[1:2] + (width,)
                                   + layer.values.shape[3:], layer.values.dtype)
            if n:
                solo.keys[..., :n, :] = layer.keys[r:r + 1, :, :n]
                solo.values[..., :n, :] = layer.values[r:r + 1, :, :n]
        else:
            solo.keys = layer.keys[r:r + 1, :, :n] * 1  # x * 1: an exact copy
            solo.values = layer.values[r:r + 1, :, :n] * 1
        solo.offset = n
        out.append(solo)
    mx.eval([a for c in out for a in (c.keys, c.values)])
    unstage(cache)
    return out


def _holder(pool: list[SlotKVCache], row: int) -> list[RowCache] | None:
    """The staged caches (one a layer) at row `row`, if a staged prompt holds it."""
    found = [c for c in pool[0].staged if c.row.index == row]
    if not found:
        return None
    handle = found[0].row
    return [next(c for c in layer.staged if c.row is handle) for layer in pool]


def _move(pool: list[SlotKVCache], cache: list[RowCache], target: int) -> None:
    """Copy a staged row to free row `target` in every layer (a re-placement: rare)."""
    for layer, layer_cache in zip(pool, cache, strict=True):
        layer.move_row(layer_cache.row.index, target, layer_cache.offset)
    cache[0].row.index = target


def vacate(pool: list[SlotKVCache], row: int) -> None:
    """Row `row` free for a decoding row: a staged prompt there moves to a free row."""
    holder = _holder(pool, row)
    if holder is not None:
        spare = max(c.row.index for c in pool[0].staged) + 1
        _move(pool, holder, spare)


def join(pool: list[SlotKVCache], cache: list[RowCache]) -> None:
    """The staged row becomes the next decoding row of every layer: in place where it sits
    right after them (the usual case), else moved there first."""
    target = len(pool[0].lengths)
    if cache[0].row.index != target:
        vacate(pool, target)
        _move(pool, cache, target)
    for layer, layer_cache in zip(pool, cache, strict=True):
        layer.adopt(layer_cache)


def compact(pool: list[SlotKVCache]) -> None:
    """After decoding rows left: staged rows move down to the rows right after the decoding
    ones, in order, so that the next to join sits where it joins (a copy of what they have
    prefilled so far)."""
    handles = sorted({id(c.row): c.row for c in pool[0].staged}.values(), key=lambda r: r.index)
    target = len(pool[0].lengths)
    for handle in handles:
        if handle.index > target:
            cache = [next(c for c in layer.staged if c.row is handle) for layer in pool]
            _move(pool, cache, target)
        target = handle.index + 1
