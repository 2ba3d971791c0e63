"""The decode batch's KV for one layer: a row per sequence, each at its own length.

mlx-lm's BatchKVCache aligns every row to one shared write position (left padding), so a
sequence joining a running batch re-copies the whole batch (merge, pad, concatenate), and
one leaving gathers every other row: on the CPU, 13 rows joining cost 120-390 ms and 7
leaving ~100 ms, a gap every running stream sees. Here a row's keys sit at columns
[0, length) of a buffer with spare rows and columns: a step writes each row's new key at
its own length (one op, in place; engine.native's on a CPU, where mlx's scatter costs ~8%
of a 16-row step), a joining sequence's KV is copied into a free row, and a leaving row's
place is taken by the last row. Joining or leaving copies those rows
only. A row's visible keys are the same run as alone (the mask hides the columns past its
length), so its attention gives the same bits as in any other batch.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache

from . import native

_COLUMN_STEP = 256  # columns are added in steps, as mlx-lm's caches grow
_ROW_STEP = 8
SHRINK_MIN_BYTES = 4 << 20  # a layer's unused buffer worth a copy to give back
# A layer's copies holding at least this are evaluated at once, so what they copied goes
# now (a join, a leave's moves, a restored history); smaller ones are left to the next
# pass: a sync a layer costs more than they hold (a burst of short prompts: 0.93x).
EVAL_NOW_BYTES = 1 << 20


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


def row_mask(lengths: mx.array, steps: int, width: int,
             window_size: int | None = None) -> mx.array:
    """Query i of row b (at position lengths[b] + i) sees columns up to lengths[b] + i of
    `width`: shape (rows, 1, steps, width)."""
    seen = lengths[:, None] + mx.arange(steps)[None, :]  # (rows, steps)
    cols = mx.arange(width)
    mask = cols[None, None, :] <= seen[:, :, None]
    if window_size is not None:
        mask = mask & (cols[None, None, :] > seen[:, :, None] - window_size)
    return mask[:, None]


class RowIndex:
    """The index arrays a step needs, made once for all of a batch's layers (they hold the
    same lengths): a few small ops per layer per step cost ~10% of a 16-row step on a CPU."""

    def __init__(self) -> None:
        self._offset: tuple[tuple[int, ...], mx.array] | None = None
        self._write: tuple[tuple[Any, ...], tuple[mx.array, ...]] | None = None

    def offset(self, lengths: list[int]) -> mx.array:
        key = tuple(lengths)
        if self._offset is None or self._offset[0] != key:
            self._offset = (key, mx.array(lengths))
        return self._offset[1]

    def write(self, lengths: list[int], steps: int, heads: int) -> tuple[mx.array, ...]:
        """(rows, heads, columns) indices of the step's new keys: broadcast to (n, H, steps)."""
        key = (tuple(lengths), steps, heads)
        if self._write is None or self._write[0] != key:
            columns = self.offset(lengths)[:, None, None] + mx.arange(steps)[None, None, :]
            index = (mx.arange(len(lengths))[:, None, None], mx.arange(heads)[None, :, None],
                     columns)
            self._write = (key, index)
        return self._write[1]


class SlotKVCache:
    """One layer's batch cache (mlx-lm's cache interface: offset, update_and_fetch,
    make_mask). Rows are kept dense: row i is the batch's i-th sequence."""

    def __init__(self, caches: list[KVCache], rows: int = 0,
                 index: RowIndex | None = None, allow_native: bool = True,
                 slack_bytes: int | None = None) -> None:
        self._index = index or RowIndex()
        # What this layer's buffer may hold beyond the rows in use (rows made in advance,
        # rows rounded up, rows left empty), set by the decode batch from the KV budget's
        # free room: the budget counts the rows' set-asides, not the buffer. None: no limit
        # (spare rows as _ROW_STEP rounds them, cut only when over half the buffer).
        self.slack_bytes = slack_bytes
        # allow_native: the engine's CpuOptions.native (False: the extension is not loaded)
        self._native = (allow_native and mx.default_device() == mx.cpu
                        and native.unavailable_reason() is None)
        first = next(c for c in caches if c.keys is not None)
        _, self._heads, _, k_dim = first.keys.shape
        v_dim = first.values.shape[3]
        self._dims = (k_dim, v_dim)
        self._dtype = first.keys.dtype
        # one row's column in this layer (keys and values): the unit of its buffer
        self.cell_bytes = self._heads * (k_dim + v_dim) * self._dtype.size
        self.lengths: list[int] = []
        self.keys = self.values = mx.zeros((0, self._heads, 0, k_dim), self._dtype)
        self.add(caches, rows)

    # -- mlx-lm's cache interface ---------------------------------------------------------
    @property
    def offset(self) -> mx.array:
        """Each row's position (its length): RoPE reads it before the step's keys go in."""
        return self._index.offset(self.lengths)

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        n, _, steps, _ = keys.shape
        width = max(self.lengths) + steps  # every row's keys after this step
        self._ensure(n, width + 1)
        if self._native:
            lengths = self.offset
            self.keys = native.kv_write(self.keys, keys, lengths)
            self.values = native.kv_write(self.values, values, lengths)
        else:  # mlx's scatter (GPUs; a CPU without the extension)
            index = self._index.write(self.lengths, steps, self._heads)
            self.keys[index] = keys
            self.values[index] = values
        self.lengths = [length + steps for length in self.lengths]
        return self.keys[:n, :, :width], self.values[:n, :, :width]

    def write_drafted(self, keys: mx.array, values: mx.array, drafts: list[int]
                      ) -> tuple[mx.array, mx.array]:
        """A step that also checks drafts (engine/ragged_pass.py): `keys` (rows, H, S, D)
        holds each row's input then its `drafts[row]` drafted tokens (padding after them);
        all are written in one op, each row grows by 1 + its drafts. Returns the rows' keys
        as a plain step's (its decode mask's width): the drafts' queries read `row_kv`."""
        n, _, steps, _ = keys.shape
        width = max(self.lengths) + 1
        self._ensure(n, max(self.lengths) + steps + 1)
        if self._native:
            lengths = self.offset
            self.keys = native.kv_write(self.keys, keys, lengths)
            self.values = native.kv_write(self.values, values, lengths)
        else:
            index = self._index.write(self.lengths, steps, self._heads)
            self.keys[index] = keys
            self.values[index] = values
        self.lengths = [length + 1 + k for length, k in zip(self.lengths, drafts, strict=True)]
        return self.keys[:n, :, :width], self.values[:n, :, :width]

    def row_kv(self, row: int) -> tuple[mx.array, mx.array]:
        """Row `row`'s keys and values as they are now (its whole length)."""
        length = self.lengths[row]
        return self.keys[row:row + 1, :, :length], self.values[row:row + 1, :, :length]

    def take_back(self, row: int, n: int) -> None:
        """Forget row `row`'s last `n` keys (drafts that were not accepted)."""
        self.lengths[row] -= n

    def make_mask(self, N: int, return_array: bool = False,  # noqa: N803 - mlx-lm's name
                  window_size: int | None = None, **_: Any) -> mx.array:
        return row_mask(self.offset, N, max(self.lengths) + N, window_size)

    @property
    def state(self) -> tuple[mx.array, mx.array, mx.array]:
        return self.keys, self.values, self.offset

    def size(self) -> int:
        return max(self.lengths, default=0)

    def empty(self) -> bool:
        return not self.lengths

    def is_trimmable(self) -> bool:
        return False

    def unwrite(self) -> None:
        """Take back every row's last key (a started step that will not be used): the next
        step writes its keys there."""
        self.lengths = [length - 1 for length in self.lengths]

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes

    # -- a compiled step (engine/compiled_step.py) ----------------------------------------
    def make_room(self, rows: int, steps: int) -> None:
        """Room for `rows` rows to take `steps` more keys each."""
        self._ensure(rows, max(self.lengths, default=0) + steps + 1)

    def advance(self, keys: mx.array, values: mx.array, steps: int) -> None:
        """The buffers a compiled step wrote its `steps` keys per row into."""
        self.keys, self.values = keys, values
        self.lengths = [length + steps for length in self.lengths]

    # -- room ahead ------------------------------------------------------------------------
    def spare_columns(self) -> int:
        """Steps left before this layer's buffer must grow."""
        return self.keys.shape[2] - max(self.lengths, default=0)

    def grow_columns(self) -> None:
        """One more step of columns now (a copy of the rows in use)."""
        self._ensure(len(self.lengths), self.keys.shape[2] + 1)

    # -- reuse -----------------------------------------------------------------------------
    def fits(self, cache: KVCache) -> bool:
        """Whether rows like `cache`'s (heads, head size, dtype) can be written here."""
        return (cache.keys is not None and cache.keys.shape[1] == self._heads
                and (cache.keys.shape[3], cache.values.shape[3]) == self._dims
                and cache.keys.dtype == self._dtype)

    def reset(self) -> None:
        """No rows; the buffer stays, for the next batch's rows (nothing is cleared: a
        row's columns past its length are masked)."""
        self.lengths = []

    # -- rows coming and going ------------------------------------------------------------
    def add(self, caches: list[KVCache], rows: int = 0) -> None:
        """Solo caches become new rows at the end (their KV copied, nothing recomputed);
        with room for `rows` rows in all."""
        n = len(self.lengths)
        self._ensure(max(rows, n + len(caches)), max(c.offset for c in caches) + 1,
                     used=n + len(caches))
        for row, cache in enumerate(caches, start=n):
            length = cache.offset
            if length:
                self.keys[row:row + 1, :, :length] = cache.keys[..., :length, :]
                self.values[row:row + 1, :, :length] = cache.values[..., :length, :]
            self.lengths.append(length)

    def extract(self, row: int, room: bool = False) -> KVCache:
        """Row `row` as a solo cache of its own (a copy). `room`: in a buffer with spare
        columns, as mlx-lm's cache grows (a row that goes on decoding alone: an exact copy
        was copied again by its first step, to grow)."""
        length = self.lengths[row]
        cache = KVCache()
        if room:
            k_dim, v_dim = self._dims
            width = _round_up(length + 1, KVCache.step)
            cache.keys = mx.zeros((1, self._heads, width, k_dim), self._dtype)
            cache.values = mx.zeros((1, self._heads, width, v_dim), self._dtype)
            cache.keys[..., :length, :] = self.keys[row:row + 1, :, :length]
            cache.values[..., :length, :] = self.values[row:row + 1, :, :length]
        else:
            cache.keys = mx.contiguous(self.keys[row:row + 1, :, :length])
            cache.values = mx.contiguous(self.values[row:row + 1, :, :length])
        cache.offset = length
        return cache

    def columns(self, row: int, start: int, stop: int) -> tuple[mx.array, mx.array]:
        """Row `row`'s keys and values at positions [start, stop) (views, not copies)."""
        return (self.keys[row:row + 1, :, start:stop], self.values[row:row + 1, :, start:stop])

    def keep(self, rows: list[int]) -> list[int]:
        """Keep only `rows` (ascending); the last kept rows move into the gaps left below
        them. Returns the new order: position p holds what was row order[p]."""
        kept = set(rows)
        order = list(range(len(rows)))
        gaps = [p for p in order if p not in kept]
        movers = [r for r in rows if r >= len(rows)]
        for gap, mover in zip(gaps, movers, strict=True):
            order[gap] = mover
        if gaps:
            self._move(list(zip(gaps, movers, strict=True)))
        self.lengths = [self.lengths[r] for r in order]
        return order

    # -- storage --------------------------------------------------------------------------
    def _move(self, moves: list[tuple[int, int]]) -> None:
        # The sources are copied out first (and evaluated), so writing into the buffer
        # never reads from it: an update whose source aliases its target copies it whole.
        # x * 1 is an exact copy (signed zeros and NaNs included). Long rows' writes are
        # evaluated at once (EVAL_NOW_BYTES): left to the next pass, every layer's update
        # held its moved rows' copies (+144 MiB of MLX's live arrays after a busy session's
        # leave, issue #46 item 14).
        sources = []
        for gap, mover in moves:
            length = self.lengths[mover]
            sources.append((gap, length, self.keys[mover:mover + 1, :, :length] * 1,
                            self.values[mover:mover + 1, :, :length] * 1))
        mx.eval([s[2:] for s in sources])
        for gap, length, keys, values in sources:
            self.keys[gap:gap + 1, :, :length] = keys
            self.values[gap:gap + 1, :, :length] = values
        if sum(k.nbytes + v.nbytes for _, _, k, v in sources) >= EVAL_NOW_BYTES:
            mx.eval(self.keys, self.values)

    def shrink(self) -> bool:
        """A buffer more than twice what its rows use (rows left, the longest one among
        them), or holding more beyond them than `slack_bytes`, is copied into one that
        fits them: kept, it held 720 MiB for 2 rows that reserved 185 (issue #46). True if
        it shrank."""
        if self._slack() < SHRINK_MIN_BYTES:
            return False  # small slack: a copy now and a growth later would cost more
        if self.nbytes <= 2 * self.rows_nbytes and not self.over_slack():
            return False
        n, width = len(self.lengths), max(self.lengths, default=0)
        rows, cols = max(n, 1), _round_up(width + 1, _COLUMN_STEP)  # a new row grows it
        k_dim, v_dim = self._dims
        keys = mx.zeros((rows, self._heads, cols, k_dim), self._dtype)
        values = mx.zeros((rows, self._heads, cols, v_dim), self._dtype)
        if n and width:
            keys[:n, :, :width] = self.keys[:n, :, :width]
            values[:n, :, :width] = self.values[:n, :, :width]
        self.keys, self.values = keys, values
        return True

    def over_slack(self) -> bool:
        """Whether the buffer holds more beyond its rows than `slack_bytes` (and enough
        that cutting it is worth a copy)."""
        slack = self._slack()
        return (self.slack_bytes is not None and slack > self.slack_bytes
                and slack >= SHRINK_MIN_BYTES)

    def _slack(self) -> int:
        """Bytes beyond the rows in use at the longest one's width (rounded as it grows)."""
        return max(0, self.nbytes - self.rows_nbytes)

    @property
    def rows_nbytes(self) -> int:
        """Bytes of the rows in use, each as wide as the longest one (rounded as it grows):
        the part of the buffer the rows' set-asides must cover (the rest is slack)."""
        cols = _round_up(max(self.lengths, default=0) + 1, _COLUMN_STEP)
        return max(len(self.lengths), 1) * cols * self.cell_bytes

    def _ensure(self, rows: int, columns: int, used: int | None = None) -> None:
        """Room for `rows` rows of `columns` columns, of which `used` (default: all) are in
        use once it is made; a bigger buffer copies the rows in use. Rows beyond `used` are
        made (rounded up, the old buffer's kept, rows asked for in advance) only as far as
        `slack_bytes` holds them."""
        have_rows, have_cols = self.keys.shape[0], self.keys.shape[2]
        if rows <= have_rows and columns <= have_cols:
            return
        new_cols = max(have_cols, _round_up(columns, _COLUMN_STEP))
        k_dim, v_dim = self._dims
        used = rows if used is None else used
        row_bytes = self._heads * new_cols * (k_dim + v_dim) * self._dtype.size
        new_rows = next(r for r in (max(have_rows, _round_up(rows, _ROW_STEP)),
                                    _round_up(rows, _ROW_STEP), rows, used)
                        if self.slack_bytes is None or (r - used) * row_bytes
                        <= self.slack_bytes)
        keys = mx.zeros((new_rows, self._heads, new_cols, k_dim), self._dtype)
        values = mx.zeros((new_rows, self._heads, new_cols, v_dim), self._dtype)
        n, width = len(self.lengths), max(self.lengths, default=0)
        if n and width:
            keys[:n, :, :width] = self.keys[:n, :, :width]
            values[:n, :, :width] = self.values[:n, :, :width]
        self.keys, self.values = keys, values


def plain(caches: list[Any]) -> bool:
    """Whether every layer's cache is mlx-lm's plain KVCache (not a rotating window,
    quantized KV or SSM state)."""
    return all(type(c) is KVCache for c in caches)


def supports(caches: list[Any]) -> bool:
    """Whether a sequence's layer caches can be slot rows: plain, and holding KV (the other
    kinds keep mlx-lm's batch classes)."""
    return plain(caches) and all(c.keys is not None for c in caches)
