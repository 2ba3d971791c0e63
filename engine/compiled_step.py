"""A decode step as one compiled graph, replayed every tick (issue #26 item 3).

Building a step's graph in Python (~30 layers of mlx-lm modules, the kernels' dispatch) cost
~2 ms of a 12-30 ms CPU step, every step. Here the step is a pure function of the input
tokens, each row's length and every layer's whole KV buffer: the keys are written at each
row's length (the native op, in place) and attention reads the buffer's full width, the
columns past a row's length masked, so shapes change only when the batch's row count or a
buffer's size does, and `mx.compile` traces it once per shape and replays it after. The
rows get the bits of the step built op by op (tests/engine/test_compiled_step.py).

Only for the CPU backend with the native kernels, and a batch's slot rows or a lone
sequence's plain mlx-lm cache (whose buffer is one such row): the ops it was checked with;
anything else takes the step built op by op.
"""

from __future__ import annotations

import atexit
import weakref
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import KVCache

from . import native
from .kv_arena import ArenaKVCache, TracedArenaLayer
from .slot_cache import SlotKVCache, row_mask

_ARENA_GRAPHS = 4  # arena layouts whose graphs are kept (a join, a leave or a move is another)

# Every compiled step still alive. Their graphs hold the native kernels' primitives; left
# in MLX's compile cache until the process ends, they were destroyed after the kernels'
# threads and the process aborted at exit ("terminate called without an active exception").
_LIVE: weakref.WeakSet[CompiledDecode] = weakref.WeakSet()


@atexit.register
def _forget_graphs() -> None:
    for compiled in list(_LIVE):
        compiled._step = None
        compiled._arena_steps = {}


class _TracedLayer:
    """One layer's KV inside the compiled step: mlx-lm's cache interface over the whole
    buffer and an array of lengths (no Python ints, so the graph holds for every step)."""

    def __init__(self, keys: mx.array, values: mx.array, lengths: mx.array,
                 width: int) -> None:
        self.keys, self.values, self.lengths = keys, values, lengths
        # the columns every layer reads: buffers grow one layer a step (cache.grow_ahead),
        # and mlx-lm makes one mask for all the layers
        self.width = width

    @property
    def offset(self) -> mx.array:
        return self.lengths

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        self.keys = native.kv_write(self.keys, keys, self.lengths)
        self.values = native.kv_write(self.values, values, self.lengths)
        rows, width = keys.shape[0], self.width
        return self.keys[:rows, :, :width], self.values[:rows, :, :width]

    def make_mask(self, N: int, return_array: bool = False,  # noqa: N803 - mlx-lm's name
                  window_size: int | None = None, **_: Any) -> mx.array:
        return row_mask(self.lengths, N, self.width, window_size)


class CompiledDecode:
    """`step(cache, tokens)`: the logits (rows, vocab) of one decode step over a batch's
    slot rows or a lone sequence's cache, from the compiled graph; the caches' buffers and
    lengths move on as the step built op by op would move them."""

    def __init__(self, model: nn.Module, kernels: Callable[[], Any],
                 view: Callable[[list[Any]], list[Any]] = lambda layers: layers) -> None:
        self.model = model
        self._kernels = kernels  # the engine's CPU kernels, active while a graph is traced
        self._view = view  # the model's view of the layers (quantized KV: ModelRunner.view)
        self._step = mx.compile(self._pure_step)
        # an arena batch's graphs, by layout (ranges and arena size): the ranges are the
        # graph's slices, not inputs, so each layout is its own compiled function
        self._arena_steps: dict[tuple[Any, ...], Callable[..., Any]] = {}
        _LIVE.add(self)
        self.traces = 0  # graphs traced so far (one per shape)

    @staticmethod
    def usable(cache: list[Any]) -> bool:
        """On the CPU with the native kernels: a batch's slot rows, or a lone sequence's
        mlx-lm KVCache with room for the step's key (its buffer is one slot row); every
        layer's buffer the same size (while they grow, one layer a step, each mix would be
        another trace: those few steps are built op by op)."""
        if not (cache and mx.default_device() == mx.cpu and native.unavailable_reason() is None):
            return False
        if all(isinstance(layer, SlotKVCache) for layer in cache):
            return len({layer.keys.shape for layer in cache}) == 1
        if all(isinstance(layer, ArenaKVCache) for layer in cache):
            return bool(cache[0].rows)
        return (all(type(layer) is KVCache and layer.keys is not None for layer in cache)
                and len({(layer.keys.shape, layer.values.shape, layer.offset)
                         for layer in cache}) == 1
                and cache[0].offset < cache[0].keys.shape[2])

    def _pure_step(self, tokens: mx.array, lengths: mx.array,
                   *buffers: mx.array) -> tuple[mx.array, ...]:
        self.traces += 1  # runs only while tracing
        n = len(buffers) // 2
        width = min(b.shape[2] for b in buffers)
        layers = [_TracedLayer(buffers[i], buffers[n + i], lengths, width) for i in range(n)]
        logits = self.model(tokens[:, None], cache=self._view(layers))[:, -1, :]
        return (logits, *[t.keys for t in layers], *[t.values for t in layers])

    def _pure_arena_step(self, layout: tuple[tuple[int, int], ...], tokens: mx.array,
                         columns: mx.array, lengths: mx.array,
                         *arenas: mx.array) -> tuple[mx.array, ...]:
        self.traces += 1  # runs only while tracing
        n = len(arenas) // 2
        layers = [TracedArenaLayer(arenas[i], arenas[n + i], columns, lengths, layout)
                  for i in range(n)]
        logits = self.model(tokens[:, None], cache=self._view(layers))[:, -1, :]
        return (logits, *[t.keys for t in layers], *[t.values for t in layers])

    def _arena_step(self, cache: list[ArenaKVCache], inputs: mx.array) -> mx.array:
        for layer in cache:  # room for the step's key (a row may move: before the graph)
            for r in layer.rows:
                layer.arena.make_room(r, r.length + 1)
        layouts = {(layer.arena.capacity, tuple((r.start, r.cap) for r in layer.rows))
                   for layer in cache}
        if len(layouts) > 1:  # layers laid out apart (never seen): the step op by op
            with self._kernels():
                return self.model(inputs[:, None], cache=self._view(cache))[:, -1, :]
        key = layouts.pop()
        step = self._arena_steps.pop(key, None)
        if step is None:
            layout = key[1]
            step = mx.compile(lambda *a: self._pure_arena_step(layout, *a))
        self._arena_steps[key] = step  # the most recent last
        while len(self._arena_steps) > _ARENA_GRAPHS:
            self._arena_steps.pop(next(iter(self._arena_steps)))
        columns = mx.array([r.start + r.length for r in cache[0].rows], dtype=mx.int32)
        arenas = [layer.arena for layer in cache]
        buffers = [a.keys for a in arenas] + [a.values for a in arenas]
        for a in arenas:  # the graph holds the only reference: written in place
            a.keys = a.values = None
        n = len(cache)
        try:
            with self._kernels():
                out = step(inputs, columns, cache[0].offset, *buffers)
        except Exception:
            for i, a in enumerate(arenas):
                a.keys, a.values = buffers[i], buffers[n + i]
            raise
        del buffers
        for i, a in enumerate(arenas):
            a.keys, a.values = out[1 + i], out[1 + n + i]
        for layer in cache:
            for r in layer.rows:
                r.length += 1
        return out[0]

    def step(self, cache: list[Any], tokens: list[int] | mx.array) -> mx.array:
        """`cache`: one that is `usable`."""
        inputs = tokens if isinstance(tokens, mx.array) else mx.array(tokens)
        if inputs.dtype != mx.uint32:  # a list's int32 and a sample's uint32: one graph
            inputs = inputs.astype(mx.uint32)
        if isinstance(cache[0], ArenaKVCache):
            return self._arena_step(cache, inputs)
        rows = inputs.shape[0]
        slots = isinstance(cache[0], SlotKVCache)
        if slots:
            for layer in cache:
                layer.make_room(rows, 1)
            lengths = cache[0].offset
        else:
            lengths = mx.array([cache[0].offset])
        buffers = [layer.keys for layer in cache] + [layer.values for layer in cache]
        for layer in cache:  # the graph holds the only reference: written in place
            layer.keys = layer.values = None
        n = len(cache)
        try:
            with self._kernels():
                out = self._step(inputs, lengths, *buffers)
        except Exception:
            for i, layer in enumerate(cache):
                layer.keys, layer.values = buffers[i], buffers[n + i]
            raise
        del buffers
        for i, layer in enumerate(cache):
            if slots:
                layer.advance(out[1 + i], out[1 + n + i], 1)
            else:
                layer.keys, layer.values = out[1 + i], out[1 + n + i]
                layer.offset += 1
        return out[0]
