"""One layer's KV for every sequence as column ranges of one arena (issue #47, one layout).

The decode batch keeps its rows in one (rows, H, columns, D) buffer (engine/slot_cache.py),
so a prompt prefilled in a cache of its own is copied in when it joins, and a buffer grown
for a long prompt grows every row (the first attempt's 348 ms staging tick). Here a layer
holds one arena (1, H, C, D); each sequence owns the columns [start, start + cap) and its
keys sit at [start, start + length). A prompt can be prefilled straight into its own range
(`ArenaRow`), so joining the batch copies nothing and no other row grows; a step writes all
rows' new keys in place at their own columns in one op (`native.kv_write_columns`), and
attention reads each row where it is (`native.cache_attention_rows`: the same bits as the
rows stacked in one buffer). A row that runs out of columns takes the free columns after
it, else moves to a range of its own (a copy of that row only); the arena grows (one copy
of the rows, by a quarter at least, rare) when no free range is wide enough, and is compacted
on request. CPU with the native extension only: the ops above are native.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.models.base import create_causal_mask
from mlx_lm.models.cache import KVCache

from . import native
from .slot_cache import EVAL_NOW_BYTES, SHRINK_MIN_BYTES, RowIndex, row_mask

COLUMN_STEP = 256  # ranges and the arena are sized in steps of columns
GROWTH_DIVISOR = 4  # a growing arena takes at least a quarter more columns (`_grow`)


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


@dataclass(slots=True)
class Region:
    """A sequence's columns: [start, start + cap), its keys at [start, start + length)."""

    start: int
    cap: int
    length: int = 0


class KvArena:
    """One layer's arena and the ranges in it (keys and values the same columns)."""

    def __init__(self, heads: int, dims: tuple[int, int], dtype: mx.Dtype,
                 columns: int = COLUMN_STEP) -> None:
        self.heads, self.dims, self.dtype = heads, dims, dtype
        self.keys = mx.zeros((1, heads, columns, dims[0]), dtype)
        self.values = mx.zeros((1, heads, columns, dims[1]), dtype)
        self.regions: list[Region] = []  # in use, any order

    @property
    def capacity(self) -> int:
        return self.keys.shape[2]

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes

    # -- ranges ------------------------------------------------------------------------
    def _gaps(self, ignore: Region | None = None) -> list[tuple[int, int]]:
        """The free ranges (start, width), in column order."""
        gaps, at = [], 0
        for r in sorted((r for r in self.regions if r is not ignore), key=lambda r: r.start):
            if r.start > at:
                gaps.append((at, r.start - at))
            at = max(at, r.start + r.cap)
        if self.capacity > at:
            gaps.append((at, self.capacity - at))
        return gaps

    def allocate(self, columns: int) -> Region:
        """A new range of at least `columns` columns (first fit; the arena grows when none
        is wide enough: one copy of the rows in use)."""
        cap = _round_up(max(columns, 1), COLUMN_STEP)
        start = next((s for s, w in self._gaps() if w >= cap), None)
        if start is None:
            self._grow(cap)
            start = next(s for s, w in self._gaps() if w >= cap)
        region = Region(start, cap)
        self.regions.append(region)
        return region

    def free(self, region: Region) -> None:
        """The range's columns are free again (nothing is cleared: past a row's length
        nothing is read)."""
        self.regions.remove(region)

    def make_room(self, region: Region, columns: int) -> None:
        """`region` holds at least `columns` columns: it takes the free columns right after
        it where they suffice (no copy), else its keys move to a wider range (a copy of
        this row only)."""
        if columns <= region.cap:
            return
        cap = _round_up(max(columns, 2 * region.cap), COLUMN_STEP)
        end = region.start + region.cap
        after = next((w for s, w in self._gaps() if s == end), 0)
        if region.cap + after >= cap:
            region.cap = cap
            return
        moved = self.allocate(cap)
        self.regions.remove(moved)
        self._copy([(region.start, moved.start, region.length)])
        region.start, region.cap = moved.start, moved.cap

    def compact(self) -> bool:
        """Rows packed from column 0 up, in column order (one copy of those that move);
        True if any moved."""
        moves, at = [], 0
        for r in sorted(self.regions, key=lambda r: r.start):
            if r.start != at:
                moves.append((r, at))
            at += r.cap
        if not moves:
            return False
        self._copy([(r.start, to, r.length) for r, to in moves])
        for r, to in moves:
            r.start = to
        return True

    def shrink(self) -> bool:
        """An arena more than twice what its ranges take (rows left) is compacted and cut
        to fit them, with one step of columns spare (the KV budget counts the rows'
        shares, not the arena). True if it shrank."""
        used = sum(r.cap for r in self.regions)
        columns = _round_up(used + COLUMN_STEP, COLUMN_STEP)
        if 2 * columns >= self.capacity or (self.nbytes * (self.capacity - columns)
                                            < SHRINK_MIN_BYTES * self.capacity):
            return False  # small slack: a copy now and a growth later would cost more
        self._repack(columns)
        return True

    def reserve(self, columns: int) -> None:
        """At least `columns` free columns after the last range: rows joining together
        grow the arena once (a copy of the rows in use), not once each."""
        if self.capacity - self._end() < columns:
            self._grow(columns)

    def _end(self) -> int:
        return max((r.start + r.cap for r in self.regions), default=0)

    def _grow(self, cap: int) -> None:
        """Room for `cap` more columns after the last range. By a quarter of the arena at
        least, not double: a doubled arena kept up to twice its rows' columns until rows
        left (and a layer's old buffer and new are alive together while it copies); a
        quarter still keeps growths few (geometric)."""
        used = self._end()
        columns = max(used + cap, self.capacity + self.capacity // GROWTH_DIVISOR)
        self._resize(_round_up(columns, COLUMN_STEP), used)

    def _repack(self, columns: int) -> None:
        """The ranges packed from column 0 up (in column order) into new buffers of
        `columns` columns: each row copied once, straight from the old buffers (compacting
        first copied the rows that move twice: out of the arena and back)."""
        keys = mx.zeros((1, self.heads, columns, self.dims[0]), self.dtype)
        values = mx.zeros((1, self.heads, columns, self.dims[1]), self.dtype)
        at = 0
        for r in sorted(self.regions, key=lambda r: r.start):
            if r.length:
                keys[:, :, at:at + r.length] = self.keys[:, :, r.start:r.start + r.length]
                values[:, :, at:at + r.length] = self.values[:, :, r.start:r.start + r.length]
            r.start = at
            at += r.cap
        self.keys, self.values = keys, values

    def _resize(self, columns: int, used: int) -> None:
        """New buffers of `columns` columns holding the first `used` columns as they are."""
        keys = mx.zeros((1, self.heads, columns, self.dims[0]), self.dtype)
        values = mx.zeros((1, self.heads, columns, self.dims[1]), self.dtype)
        if used:
            keys[:, :, :used] = self.keys[:, :, :used]
            values[:, :, :used] = self.values[:, :, :used]
        self.keys, self.values = keys, values

    def _copy(self, moves: list[tuple[int, int, int]]) -> None:
        """(from, to, length) column runs: the sources are copied out first (and evaluated),
        so the write into the arena never reads from it (an update whose source aliases
        its target copies the whole arena). x * 1 is an exact copy. Long runs' writes are
        evaluated at once, so the copies go now, not at the next pass (EVAL_NOW_BYTES, as
        SlotKVCache's moves)."""
        sources = [(to, n, self.keys[:, :, a:a + n] * 1, self.values[:, :, a:a + n] * 1)
                   for a, to, n in moves if n]
        mx.eval([s[2:] for s in sources])
        for to, n, keys, values in sources:
            self.keys[:, :, to:to + n] = keys
            self.values[:, :, to:to + n] = values
        if sum(k.nbytes + v.nbytes for _, _, k, v in sources) >= EVAL_NOW_BYTES:
            mx.eval(self.keys, self.values)

    # -- keys in and out ---------------------------------------------------------------
    def write(self, regions: list[Region], keys: mx.array, values: mx.array) -> None:
        """`keys` (n, H, S, D): row b's at its region's length (room made by the caller)."""
        columns = mx.array([r.start + r.length for r in regions], dtype=mx.int32)
        self.keys = native.kv_write_columns(self.keys, keys, columns)
        self.values = native.kv_write_columns(self.values, values, columns)

    def view(self, region: Region, length: int | None = None) -> tuple[mx.array, mx.array]:
        """The region's first `length` (default: its length) keys and values, (1, H, T, D)
        views of the arena (not copies)."""
        stop = region.start + (region.length if length is None else length)
        return self.keys[:, :, region.start:stop], self.values[:, :, region.start:stop]


class ArenaRow:
    """A sequence's own KV in its arena range, in mlx-lm's single-sequence cache interface
    (offset, update_and_fetch, make_mask): a prompt prefilled here joins a batch over the
    same arena (`ArenaKVCache.adopt`) without a copy."""

    def __init__(self, arena: KvArena, columns: int) -> None:
        self.arena = arena
        self.region = arena.allocate(columns)

    @property
    def offset(self) -> int:
        return self.region.length

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        steps = keys.shape[2]
        self.arena.make_room(self.region, self.region.length + steps)
        self.arena.write([self.region], keys, values)
        self.region.length += steps
        return self.arena.view(self.region)

    def make_mask(self, N: int, return_array: bool = False,  # noqa: N803 - mlx-lm's name
                  window_size: int | None = None, **_: Any) -> mx.array | str | None:
        if return_array or window_size is not None:
            return create_causal_mask(N, self.offset, window_size=window_size)
        return None if N == 1 else "causal"

    @property
    def state(self) -> tuple[mx.array, mx.array]:
        return self.arena.view(self.region)

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        n = min(self.region.length, n)
        self.region.length -= n
        return n

    def release(self) -> None:
        self.arena.free(self.region)


class ArenaKVCache:
    """One layer's decode batch over an arena: row i is the batch's i-th sequence, its KV in
    its own range. mlx-lm's cache interface (offset, update_and_fetch, make_mask); the
    engine's attention dispatcher hands the layer's queries back (`attend`), which reads
    every row where it is."""

    def __init__(self, arena: KvArena, index: RowIndex | None = None) -> None:
        self.arena = arena
        self._index = index or RowIndex()
        self.rows: list[Region] = []

    @classmethod
    def like(cls, cache: KVCache, index: RowIndex | None = None,
             columns: int = COLUMN_STEP) -> ArenaKVCache:
        """An empty batch whose arena takes rows like `cache`'s (heads, head sizes, dtype)."""
        _, heads, _, k_dim = cache.keys.shape
        return cls(KvArena(heads, (k_dim, cache.values.shape[3]), cache.keys.dtype, columns),
                   index)

    @property
    def lengths(self) -> list[int]:
        return [r.length for r in self.rows]

    @lengths.setter
    def lengths(self, lengths: list[int]) -> None:  # a failed pass put back (RaggedPass.undo)
        for r, n in zip(self.rows, lengths, strict=True):
            r.length = n

    # -- mlx-lm's cache interface ---------------------------------------------------------
    @property
    def offset(self) -> mx.array:
        return self._index.offset(self.lengths)

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        steps = keys.shape[2]
        for r in self.rows:
            self.arena.make_room(r, r.length + steps)
        self.arena.write(self.rows, keys, values)
        for r in self.rows:
            r.length += steps
        return self.arena.keys, self.arena.values  # read through `attend`

    def make_mask(self, N: int, return_array: bool = False,  # noqa: N803 - mlx-lm's name
                  window_size: int | None = None, **_: Any) -> mx.array:
        return row_mask(self.offset, N, max(self.lengths) + N, window_size)

    def write_drafted(self, keys: mx.array, values: mx.array, drafts: list[int]
                      ) -> tuple[mx.array, mx.array]:
        """A step that also checks drafts (engine/ragged_pass.py): `keys` (rows, H, S, D),
        each row's input then its `drafts[row]` drafted tokens (padding after), written in
        one op; each row grows by 1 + its drafts. The rows' plain step reads `attend` with
        `widths` (each row's length before, plus its input)."""
        steps = keys.shape[2]
        for r in self.rows:
            self.arena.make_room(r, r.length + steps)
        self.arena.write(self.rows, keys, values)
        for r, k in zip(self.rows, drafts, strict=True):
            r.length += 1 + k
        return self.arena.keys, self.arena.values

    def attend(self, queries: mx.array, scale: float, mask: Any, tiled_from: int = -1,
               force_scalar: bool = False, sinks: mx.array | None = None,
               packing: Any = None, widths: list[int] | None = None) -> mx.array:
        """Attention of the rows' queries (rows, Hq, L, D) over each row's own keys (its
        first `widths[row]` where given)."""
        views = [self.arena.view(r, None if widths is None else w)
                 for r, w in zip(self.rows, widths or [None] * len(self.rows), strict=True)]
        return native.cache_attention_rows(queries, [k for k, _ in views],
                                           [v for _, v in views], scale, mask,
                                           tiled_from=tiled_from, force_scalar=force_scalar,
                                           sinks=sinks, packing=packing)

    def stacked(self) -> tuple[mx.array, mx.array]:
        """The rows in one (rows, H, T, D) buffer (a copy; zeros past a row's length), for
        attention outside the native kernel."""
        width = max(self.lengths)
        keys, values = [], []
        for r in self.rows:
            k, v = self.arena.view(r)
            pad = [(0, 0), (0, 0), (0, width - r.length), (0, 0)]
            keys.append(mx.pad(k, pad))
            values.append(mx.pad(v, pad))
        return mx.concatenate(keys), mx.concatenate(values)

    @property
    def state(self) -> tuple[mx.array, mx.array, mx.array]:
        return self.arena.keys, self.arena.values, self.offset

    def size(self) -> int:
        return max(self.lengths, default=0)

    def empty(self) -> bool:
        return not self.rows

    def is_trimmable(self) -> bool:
        return False

    @property
    def nbytes(self) -> int:
        return self.arena.nbytes

    # -- speculation -----------------------------------------------------------------------
    def row_kv(self, row: int) -> tuple[mx.array, mx.array]:
        return self.arena.view(self.rows[row])

    def columns(self, row: int, start: int, stop: int) -> tuple[mx.array, mx.array]:
        """Row `row`'s keys and values at positions [start, stop) (views, not copies)."""
        a = self.rows[row].start
        return (self.arena.keys[:, :, a + start:a + stop],
                self.arena.values[:, :, a + start:a + stop])

    def take_back(self, row: int, n: int) -> None:
        """Forget row `row`'s last `n` keys (drafts that were not accepted)."""
        self.rows[row].length -= n

    def unwrite(self) -> None:
        """Take back every row's last key (a started step that will not be used)."""
        for r in self.rows:
            r.length -= 1

    # -- reuse -----------------------------------------------------------------------------
    def fits(self, cache: KVCache) -> bool:
        """Whether rows like `cache`'s (heads, head sizes, dtype) can be written here."""
        return (cache.keys is not None and cache.keys.shape[1] == self.arena.heads
                and (cache.keys.shape[3], cache.values.shape[3]) == self.arena.dims
                and cache.keys.dtype == self.arena.dtype)

    def reset(self) -> None:
        """No rows; the arena stays for the next batch's rows."""
        self.keep([])

    # -- rows coming and going ------------------------------------------------------------
    def adopt(self, rows: list[ArenaRow]) -> None:
        """Sequences prefilled in this arena become rows at the end: their ranges are
        theirs already, nothing is copied."""
        for row in rows:
            assert row.arena is self.arena, "a row of another arena"
            self.rows.append(row.region)

    def add(self, caches: list[KVCache], room: int = COLUMN_STEP, coming: int = 0) -> None:
        """Solo caches become rows at the end: each copied into a range of its own with
        `room` columns to decode into. `coming`: rows still prefilling that will join soon
        (room made for them in the same growth)."""
        # one growth for all of them (and for `coming` rows as wide as the widest)
        caps = [_round_up(c.offset + room, COLUMN_STEP) for c in caches]
        self.arena.reserve(sum(caps) + coming * max(caps, default=0))
        for cache in caches:
            length = cache.offset
            region = self.arena.allocate(length + room)
            if length:
                a, b = region.start, region.start + length
                self.arena.keys[:, :, a:b] = cache.keys[..., :length, :]
                self.arena.values[:, :, a:b] = cache.values[..., :length, :]
            region.length = length
            self.rows.append(region)

    def keep(self, rows: list[int]) -> list[int]:
        """Keep only `rows` (ascending), in their order; the others' ranges are free again
        (no row moves: nothing is copied). Returns the kept rows' old indices."""
        kept = set(rows)
        for i, r in enumerate(self.rows):
            if i not in kept:
                self.arena.free(r)
        self.rows = [self.rows[i] for i in rows]
        return list(rows)

    def extract(self, row: int, room: bool = False) -> KVCache:
        """Row `row` as a solo cache of its own (a copy); `room`: with spare columns to
        decode into, as mlx-lm's cache grows."""
        region = self.rows[row]
        cache = KVCache()
        keys, values = self.arena.view(region)
        if room:
            width = _round_up(region.length + 1, KVCache.step)
            pad = [(0, 0), (0, 0), (0, width - region.length), (0, 0)]
            cache.keys, cache.values = mx.pad(keys, pad), mx.pad(values, pad)
        else:
            cache.keys, cache.values = mx.contiguous(keys), mx.contiguous(values)
        cache.offset = region.length
        return cache


class TracedArenaLayer:
    """One layer's arena inside the compiled decode step (engine/compiled_step.py): the
    rows' ranges fixed for the graph (`layout`: (start, cap) a row), their write columns
    and lengths arrays; attention reads each row's whole range, the columns past its
    length masked (the bits of reading up to its length)."""

    def __init__(self, keys: mx.array, values: mx.array, columns: mx.array,
                 lengths: mx.array, layout: tuple[tuple[int, int], ...]) -> None:
        self.keys, self.values = keys, values
        self.columns, self.lengths, self.layout = columns, lengths, layout
        self.width = max(cap for _, cap in layout)

    @property
    def offset(self) -> mx.array:
        return self.lengths

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        self.keys = native.kv_write_columns(self.keys, keys, self.columns)
        self.values = native.kv_write_columns(self.values, values, self.columns)
        return self.keys, self.values  # read through `attend`

    def make_mask(self, N: int, return_array: bool = False,  # noqa: N803 - mlx-lm's name
                  window_size: int | None = None, **_: Any) -> mx.array:
        return row_mask(self.lengths, N, self.width, window_size)

    def attend(self, queries: mx.array, scale: float, mask: Any, tiled_from: int = -1,
               force_scalar: bool = False, sinks: mx.array | None = None,
               packing: Any = None) -> mx.array:
        keys = [self.keys[:, :, a:a + cap] for a, cap in self.layout]
        values = [self.values[:, :, a:a + cap] for a, cap in self.layout]
        return native.cache_attention_rows(queries, keys, values, scale, mask,
                                           tiled_from=tiled_from, force_scalar=force_scalar,
                                           sinks=sinks, packing=packing)
