"""Faster exp-based ops for MLX's CPU backend, used only inside the engine's forward passes.

Why: on x86 MLX's CPU `exp` is scalar code that calls a software `fma` for each of its six
polynomial steps (about 12 ns an element, where numpy takes 0.5). SiLU and the attention
softmax are built on it, and they take about a quarter of a batched decode step and a
third of a prefill pass on the bundled model. Here the same Cephes polynomial runs with
plain multiply-adds in compiled kernels: 3-4x faster, within 1.2e-7 relative error of
MLX's own `exp` (at most one unit in the last place; 90 % of results are bit-identical).

How: the engine's own layers (engine/cpu_layers.py) call the dispatchers below in place
of mlx-lm's `swiglu` and `scaled_dot_product_attention`. They take the fast path only on the
thread that is inside `active()` (the engine's forward passes), only for float32 and only on
the CPU; otherwise they call the stock function. With the native extension (engine/native)
loaded, those passes also run SiLU x up and attention as native ops (and, in
engine/cpu_layers.py, RoPE and RMSNorm), as `CpuOptions` allows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import mlx.core as mx

from . import native  # the extension itself loads lazily, at the first engine pass
from .cpu_options import CpuOptions
from .kv_arena import ArenaKVCache, TracedArenaLayer
from .kv_quant import PackedLayer
from .ragged_pass import RaggedLayer

_DEFAULTS = CpuOptions()

_MAGIC = 12582912.0  # 1.5 * 2**23: (t + _MAGIC) - _MAGIC rounds t to the nearest integer
_MASKED = float(mx.finfo(mx.float32).min)  # finite: a fully masked padding row stays NaN-free
_MIN_SIZE = 4096  # below this a stock op is as fast; the compiled calls' overhead dominates
_state = threading.local()


def _exp_parts(x: mx.array) -> tuple[mx.array, mx.array]:
    """exp(x) = p * 2**n: the polynomial p and the float32 bit pattern of 2**n.

    The clip makes the product come out right at the edges with no selects: n = -127 gives
    the bit pattern of 0.0 (exp underflows to 0), n = 128 that of +inf; NaN stays NaN in p.
    """
    t = mx.clip(x, -88.0, 88.5) * 1.4426950408889634
    n = (t + _MAGIC) - _MAGIC
    f = t - n  # in [-0.5, 0.5]
    p = 1.535336188319500e-4 * f + 1.339887440266574e-3
    p = p * f + 9.618437357674640e-3
    p = p * f + 5.550332471162809e-2
    p = p * f + 2.402264791363012e-1
    p = p * f + 6.931472028550421e-1
    p = p * f + 1.0
    return p, mx.left_shift(n.astype(mx.int32) + 127, 23)


def _silu_mul(gate: mx.array, p: mx.array, scale: mx.array, up: mx.array) -> mx.array:
    """silu(gate) * up given exp(-gate) = p * scale. No select (MLX's CPU `where` costs
    ~5 ns an element): a huge negative gate gives exp = inf and a product of -0."""
    return gate * up / (1.0 + p * scale)


# Shapeless: decode shapes change every step. `view` cannot be traced shapelessly, so the
# bit pattern of 2**n is reinterpreted between two kernels (a view costs nothing).
_exp_parts_c = mx.compile(_exp_parts, shapeless=True)
_neg_exp_parts_c = mx.compile(lambda x: _exp_parts(-x), shapeless=True)
_shifted_exp_parts_c = mx.compile(lambda x, m: _exp_parts(x - m), shapeless=True)
_times_c = mx.compile(lambda p, scale: p * scale, shapeless=True)
_silu_mul_c = mx.compile(_silu_mul, shapeless=True)


def exp(x: mx.array) -> mx.array:
    """float32 exp, 3-4x faster than MLX's on the x86 CPU backend, within 1 ulp of it."""
    p, bits = _exp_parts_c(x)
    return _times_c(p, bits.view(mx.float32))


def swiglu(gate: mx.array, up: mx.array) -> mx.array:
    p, bits = _neg_exp_parts_c(gate)
    return _silu_mul_c(gate, p, bits.view(mx.float32), up)


def softmax(x: mx.array) -> mx.array:
    """Softmax over the last axis, computed in float32 as MLX's precise softmax."""
    p, bits = _shifted_exp_parts_c(x, mx.max(x, axis=-1, keepdims=True))
    e = _times_c(p, bits.view(mx.float32))
    return e * (1.0 / mx.sum(e, axis=-1, keepdims=True))


def attention(queries: mx.array, keys: mx.array, values: mx.array, scale: float,
              mask: mx.array | str | None) -> mx.array:
    """MLX's composed CPU attention (grouped heads, masks) with the faster softmax.

    The `rep` query heads that share a key head are stacked into one matrix, so each
    (row, key head) is one BLAS call of rep x length rows rather than rep calls of length
    rows: at decode (length 1) that is 3x fewer, 3x taller calls, with nothing broadcast.
    """
    b, n_heads, length, dim = queries.shape
    n_kv, total = keys.shape[1], keys.shape[2]
    rep = n_heads // n_kv
    q = (queries * scale).reshape(b, n_kv, rep * length, dim)
    scores = (q @ keys.swapaxes(-1, -2)).reshape(b, n_kv, rep, length, total)
    if isinstance(mask, str):  # "causal": query i sees keys up to i + (keys - length)
        mask = mx.arange(total - length, total)[:, None] >= mx.arange(total)[None]
    if mask is not None:
        if mask.ndim == 4:  # (b|1, heads|1, length, keys) -> the grouped layout
            mask = (mask.reshape(mask.shape[0], n_kv, rep, *mask.shape[2:])
                    if mask.shape[1] == n_heads else mx.expand_dims(mask, 2))
        if mask.dtype == mx.bool_:  # as an additive mask: a select costs ~5 ns an element
            mask = (mask.astype(scores.dtype) - 1.0) * -_MASKED
        scores = scores + mask
    probs = softmax(scores).reshape(b, n_kv, rep * length, total)
    return (probs @ values).reshape(b, n_heads, length, dim)


class Pass:
    """What the ops of one forward pass may use, decided once when the pass starts (a decode
    step makes ~800 op calls)."""

    __slots__ = ("attention", "rowwise", "scalar", "tiled_from")

    def __init__(self, options: CpuOptions) -> None:
        # loads the extension, or warns once that it cannot
        loaded = options.native and native.available()
        self.rowwise = loaded and options.rowwise
        # the native attention kernel takes passes of any length: decode steps and short
        # chunks (one pass over the cache per key head), long prompt chunks (tiled, online
        # softmax; 5-16x faster than the composed BLAS path at 512 queries, docs/kernels.md)
        self.attention = loaded and options.attention
        self.scalar = options.scalar
        # 1: the tiled kernel for every pass (one arithmetic, engine/determinism.py);
        # 16: the two-pass kernel below that, which was faster there but not invariant.
        self.tiled_from = 1 if options.invariant else 16


@contextmanager
def active(options: CpuOptions = _DEFAULTS) -> Iterator[None]:
    """Forward passes built on this thread inside the block use the fast kernels."""
    previous = getattr(_state, "on", None)
    _state.on = Pass(options)
    try:
        yield
    finally:
        _state.on = previous


def _fast(x: mx.array, size: int) -> bool:
    return getattr(_state, "on", None) is not None and x.dtype == mx.float32 \
        and size >= _MIN_SIZE


def native_rowwise(x: mx.array) -> Pass | None:
    """The pass, when it is an engine pass on float32 with the native row-wise ops on."""
    on = getattr(_state, "on", None)
    return on if on is not None and on.rowwise and x.dtype == mx.float32 else None


def native_attention(x: mx.array) -> Pass | None:
    """The pass, when it is an engine pass on float32 with the native attention kernel on."""
    on = getattr(_state, "on", None)
    return on if on is not None and on.attention and x.dtype == mx.float32 else None


def _swiglu_dispatch(stock: Callable[..., mx.array]) -> Callable[..., mx.array]:
    def dispatch(gate: mx.array, up: mx.array) -> mx.array:
        on = native_rowwise(gate)
        if on is not None and up.dtype == mx.float32 and up.shape == gate.shape:
            return native.silu_mul(gate, up, force_scalar=on.scalar)
        return swiglu(gate, up) if _fast(gate, gate.size) else stock(gate, up)
    return dispatch


def _sdpa_dispatch(stock: Callable[..., mx.array]) -> Callable[..., mx.array]:
    def dispatch(queries: mx.array, keys: mx.array, values: mx.array, cache: Any,
                 scale: float, mask: Any, sinks: mx.array | None = None) -> mx.array:
        on = getattr(_state, "on", None)
        packing = None
        if isinstance(cache, PackedLayer):  # quantized KV (engine/kv_quant.py)
            if keys.dtype == mx.uint8:
                packing = cache.packing
            cache = cache.inner
        if isinstance(cache, RaggedLayer):  # a tick's rows and chunks in one pass
            return cache.attend(queries, scale, on.tiled_from, on.scalar, packing)
        if isinstance(cache, TracedArenaLayer):  # the compiled step over an arena
            return cache.attend(queries, scale, mask, on.tiled_from, on.scalar, sinks, packing)
        if isinstance(cache, ArenaKVCache):  # rows read where they are in the arena
            if on is not None and on.attention:
                return cache.attend(queries, scale, mask, on.tiled_from, on.scalar, sinks,
                                    packing)
            keys, values = cache.stacked()
        usable = (on is not None and not hasattr(cache, "bits")
                  and queries.ndim == 4 and queries.shape[1] % keys.shape[1] == 0
                  and queries.dtype == mx.float32)
        # gpt-oss's sinks: the native kernel takes them (a key without a value a head)
        sunk = sinks is not None and sinks.shape == (queries.shape[1],)
        if usable and on.attention and (sinks is None or sunk) and (
                keys.dtype == mx.float32 or packing is not None):
            return native.cache_attention(queries, keys, values, scale, mask,
                                          tiled_from=on.tiled_from, force_scalar=on.scalar,
                                          sinks=sinks, packing=packing)
        if packing is not None:  # no native kernel for this call: the rows as floats
            keys, values = packing.unpack(keys), packing.unpack(values)
        if usable and sinks is None and _fast(queries, queries.size // queries.shape[-1]
                                              * keys.shape[2]):
            return attention(queries, keys, values, scale, mask)
        return stock(queries, keys, values, cache, scale=scale, mask=mask, sinks=sinks)
    return dispatch


# mlx-lm's module-level functions the engine's layers call through a dispatcher instead
DISPATCHERS = {"swiglu": _swiglu_dispatch,
               "scaled_dot_product_attention": _sdpa_dispatch}
