"""One forward pass over a tick's decode rows and prefill chunks together (issue #26 item 2).

Before, a tick that prefilled ran the prompt chunks as a pass of their own, then the decode
pass: every pass reads all the weights and costs ~5 ms of graph building, and the streams
waited for both. Here the tick's tokens are laid end to end as one sequence of T tokens
(decode rows first, one token each, then each chunk): the linears, norms and MLP see T rows
of one matrix, and only attention, RoPE and the KV writes see the segments. Each segment
keeps its own KV (the decode batch's slot rows, each chunk its own cache), its own
positions and its own mask, and its attention is the same native call as in a pass of its
own, so every row gets the bits it would get alone (the packed linears are the same
arithmetic at every row count; engine/determinism.py). No padding, no history copied into a
padded batch: several chats' next turns share a pass at the cost of their tokens.

How it reaches the model without re-implementing it: mlx-lm's attention reads
`cache.offset` for RoPE, calls `cache.update_and_fetch` and passes `cache` on to the
module's `scaled_dot_product_attention`. Each layer gets a `RaggedLayer` as its cache; its
offset is a `Positions` (engine.cpu_layers' RoPE rotates each token at its own position),
its update writes each segment's keys into that segment's cache, and the engine's attention
dispatcher (engine/cpu_kernels.py) hands the layer's queries back to it (`attend`). Only on
the CPU with the native kernels, for models whose every cache is a plain KVCache and whose
RoPE is nn.RoPE (`cpu_layers.supports_ragged`); elsewhere the separate passes run as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache

from . import native
from .kv_arena import ArenaKVCache
from .slot_cache import SlotKVCache


@dataclass(frozen=True, slots=True)
class Positions:
    """Every token's position in its own sequence (RoPE's offset in a ragged pass)."""

    array: mx.array  # (T,) int32


class RaggedPass:
    """The segments of one pass: `rows` decode rows (the slot batch's rows, or one solo
    cache), then prefill chunks, each `(its layer caches, its token count)`."""

    def __init__(self, decode: list[Any] | None, rows: int,
                 chunks: list[tuple[list[KVCache], int]],
                 drafts: list[int] | None = None) -> None:
        self.rows = rows
        slot = decode is not None and isinstance(decode[0], SlotKVCache | ArenaKVCache)
        # Drafted tokens to check (engine/speculation.py), per decode row: a slot row's come
        # right after the rows, a segment each, written with the row's input into its slot
        # row; a lone row's make its one segment longer.
        drafts = drafts if drafts is not None and any(drafts) else None
        segments: list[tuple[list[Any], int, int]] = []  # (caches, start, length)
        positions: list[int] = []
        start = 0
        self.drafted: list[tuple[int, int, int]] = []  # slot rows': (row, start, count)
        if decode is not None:
            if slot:
                positions += list(decode[0].lengths)
                start = rows
                for row, k in enumerate(drafts or []):
                    if k:
                        self.drafted.append((row, start, k))
                        base = decode[0].lengths[row] + 1
                        positions += range(base, base + k)
                        start += k
            else:  # one row decoding alone: a segment of its own cache
                n = 1 + (drafts[0] if drafts else 0)
                segments.append((decode, 0, n))
                positions += range(decode[0].offset, decode[0].offset + n)
                start = n
        for caches, n in chunks:
            segments.append((caches, start, n))
            positions += range(caches[0].offset, caches[0].offset + n)
            start += n
        self._offsets = [[c.offset for c in caches] for caches, _, _ in segments]
        self._lengths = list(decode[0].lengths) if slot else []
        self.segments = segments
        self.positions = Positions(mx.array(positions, dtype=mx.int32))
        # Masks as each pass of its own would have them, made before any layer's KV grows.
        # (mlx-lm's create_attention_mask passes both keywords)
        self.decode_mask = (decode[0].make_mask(1, return_array=False, window_size=None)
                            if slot else None)
        self.masks = [caches[0].make_mask(n, return_array=False, window_size=None)
                      for caches, _, n in segments]
        # A slot row's drafts go into its row with its input: which of the pass's tokens
        # each row writes, (rows, 1 + most drafts), past its count repeating its last one
        # (written beyond the row's length: never seen, overwritten later)
        self.write_index: mx.array | None = None
        if self.drafted:
            width = 1 + max(k for _, _, k in self.drafted)
            table = [[row] * width for row in range(rows)]
            for row, at, k in self.drafted:
                table[row][1:] = [at + j for j in range(k)] + [at + k - 1] * (width - 1 - k)
            self.write_index = mx.array(table, dtype=mx.int32)
            self.draft_counts = [0] * rows
            for row, _, k in self.drafted:
                self.draft_counts[row] = k
        self.layers = [RaggedLayer(self, i, decode[i] if slot else None)
                       for i in range(len(decode or chunks[0][0]))]

    def undo(self) -> None:
        """Put every cache back as it was before the pass (a pass that failed part-way:
        the tick is then run as separate passes, which fail only the request at fault)."""
        for (caches, _, _), offsets in zip(self.segments, self._offsets, strict=True):
            for layer, offset in zip(caches, offsets, strict=True):
                layer.offset = offset  # what KVCache.trim does
        for layer in self.layers:
            if layer.slot is not None:
                layer.slot.lengths = list(self._lengths)

    def close(self) -> None:
        """Drop the layers (each points back at the pass) and the caches: otherwise the
        cycle keeps every cache of the pass, the slot batch's buffers included, alive until
        Python's cyclic GC runs. Measured on the bundled model (issue #28): ~370 MiB of KV
        buffers held so after 60 requests, most of RSS beyond the KV budget."""
        self.layers, self.segments = [], []

    def cache_states(self) -> list[Any]:
        states = [layer.slot.state for layer in self.layers if layer.slot is not None]
        return states + [c.state for caches, _, _ in self.segments for c in caches]


class RaggedLayer:
    """One layer's view of a ragged pass, in mlx-lm's cache interface."""

    def __init__(self, ragged: RaggedPass, index: int,
                 slot: SlotKVCache | ArenaKVCache | None) -> None:
        self.ragged = ragged
        self.index = index
        self.slot = slot
        self._slot_kv: tuple[mx.array, mx.array] | None = None
        self._draft_kv: list[tuple[mx.array, mx.array]] = []
        self._kv: list[tuple[mx.array, mx.array]] = []

    @property
    def offset(self) -> Positions:
        return self.ragged.positions

    def make_mask(self, *_: Any, **__: Any) -> None:
        return None  # each segment's own mask is in the pass (RaggedPass.masks)

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        """Write each segment's new keys into its own cache. Returns the inputs: attention
        reads each segment's keys from here (`attend`)."""
        p = self.ragged
        if self.slot is not None and p.write_index is not None:
            # each row's input and drafts, (rows, H, 1 + most drafts, D), in one write
            rows, width = p.write_index.shape
            flat = p.write_index.reshape(-1)

            def gather(x: mx.array) -> mx.array:
                picked = mx.take(x[0], flat, axis=1)  # (H, rows * width, D)
                return picked.reshape(x.shape[1], rows, width, -1).swapaxes(0, 1)

            self._slot_kv = self.slot.write_drafted(gather(keys), gather(values),
                                                    p.draft_counts)
            self._draft_kv = [self.slot.row_kv(row) for row, _, _ in p.drafted]
        elif self.slot is not None:  # (1, H, T, D) -> the rows' (rows, H, 1, D)
            self._slot_kv = self.slot.update_and_fetch(keys.swapaxes(0, 2)[:p.rows],
                                                       values.swapaxes(0, 2)[:p.rows])
        self._kv = [caches[self.index].update_and_fetch(keys[:, :, a:a + n],
                                                        values[:, :, a:a + n])
                    for caches, a, n in p.segments]
        return keys, values

    def attend(self, queries: mx.array, scale: float, tiled_from: int,
               force_scalar: bool = False, packing: Any = None) -> mx.array:
        """Each segment's attention over its own keys, as a pass of its own would run it;
        the outputs laid end to end again, (1, Hq, T, D). `packing`: the keys are quantized
        rows (engine/kv_quant.py), written so by the PackedLayer in front of this one."""
        p = self.ragged
        outs = []
        if self._slot_kv is not None and isinstance(self.slot, ArenaKVCache):
            # rows read where they are in the arena; a drafted row's plain step sees its
            # keys up to its input (the drafts' queries read `row_kv` below)
            q = queries.swapaxes(0, 2)[:p.rows]
            widths = [n + 1 for n in p._lengths] if p.drafted else None
            out = self.slot.attend(q, scale, p.decode_mask, tiled_from, force_scalar,
                                   packing=packing, widths=widths)
            outs.append(out.swapaxes(0, 2))
        elif self._slot_kv is not None:
            k, v = self._slot_kv
            q = queries.swapaxes(0, 2)[:p.rows]  # (rows, Hq, 1, D)
            out = native.cache_attention(q, k, v, scale, p.decode_mask, tiled_from=tiled_from,
                                         force_scalar=force_scalar, packing=packing)
            outs.append(out.swapaxes(0, 2))
        for (_, a, n), (k, v) in zip(p.drafted, self._draft_kv, strict=True):
            # a row's drafts over its row's keys: its input's and theirs are the last 1 + n
            outs.append(native.cache_attention(queries[:, :, a:a + n], k, v, scale,
                                               "causal" if n > 1 else None,
                                               tiled_from=tiled_from, force_scalar=force_scalar,
                                               packing=packing))
        for (_, a, n), (k, v), mask in zip(p.segments, self._kv, p.masks, strict=True):
            outs.append(native.cache_attention(queries[:, :, a:a + n], k, v, scale, mask,
                                               tiled_from=tiled_from, force_scalar=force_scalar,
                                               packing=packing))
        self._slot_kv, self._draft_kv, self._kv = None, [], []
        return outs[0] if len(outs) == 1 else mx.concatenate(outs, axis=2)
