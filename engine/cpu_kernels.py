"""Faster exp-based ops for MLX's CPU backend, used only inside the engine's forward passes.

Why: on x86 MLX's CPU `exp` is scalar code that calls a software `fma` for each of its six
polynomial steps (about 12 ns an element, where numpy takes 0.5). SiLU and the attention
softmax are built on it, and they take about a quarter of a batched decode step and a
third of a prefill pass on the bundled model. Here the same Cephes polynomial runs with
plain multiply-adds in compiled kernels: 3-4x faster, within 1.2e-7 relative error of
MLX's own `exp` (at most one unit in the last place; 90 % of results are bit-identical).

How: `install(model)` replaces the module-level `swiglu` and `scaled_dot_product_attention`
names of the model's mlx-lm module with dispatchers. They take the fast path only on the
thread that is inside `active()` (the engine's forward passes), only for float32 and only
on the CPU; every other caller, mlx-lm's own generators sharing the model included, gets the
stock function. The model architecture itself is untouched.

With the native extension (engine/native) loaded, those passes also run SiLU x up, RoPE and
RMSNorm as one native op each: MLX's CPU backend composes mx.fast.rope and mx.fast.rms_norm
from 5-15 small ops (~130 and ~35 us a call at decode, against ~5 us native), which made
them a quarter of a solo decode step. `nn.RoPE` and `nn.RMSNorm` modules are re-classed to
subclasses that take the native op inside the engine's passes and call the stock one
otherwise (other RoPE variants keep MLX's op). BATCHCHAT_NATIVE_ROWWISE=0 turns this off.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from . import native  # the extension itself loads lazily, at the first engine pass
from .determinism import invariant_from_env
from .ragged_pass import Positions, RaggedLayer

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


# 0: SiLU x up, RoPE and RMSNorm keep MLX's ops even with the native extension loaded.
NATIVE_ROWWISE_ENV = "BATCHCHAT_NATIVE_ROWWISE"
# 0: never the native attention kernel. It takes passes of any length: decode steps and
# short chunks (one pass over the cache per key head), long prompt chunks (tiled, online
# softmax; 5-16x faster than the composed BLAS path at 512 queries, docs/kernels.md).
NATIVE_ATTENTION_ENV = "BATCHCHAT_NATIVE_ATTENTION"


class _Pass:
    """What the ops of one forward pass may use, read once when the pass starts (a decode
    step makes ~800 op calls; reading the environment in each cost ~2 ms a step)."""

    __slots__ = ("attention", "rowwise", "tiled_from")

    def __init__(self) -> None:
        loaded = native.available()  # loads the extension, or warns once that it cannot
        self.rowwise = loaded and os.environ.get(NATIVE_ROWWISE_ENV, "") != "0"
        self.attention = loaded and os.environ.get(NATIVE_ATTENTION_ENV, "") != "0"
        # 1: the tiled kernel for every pass (one arithmetic, engine/determinism.py);
        # 16: the two-pass kernel below that, which was faster there but not invariant.
        self.tiled_from = 1 if invariant_from_env() else 16


@contextmanager
def active() -> Iterator[None]:
    """Forward passes built on this thread inside the block use the fast kernels."""
    previous = getattr(_state, "on", None)
    _state.on = _Pass()
    try:
        yield
    finally:
        _state.on = previous


def _fast(x: mx.array, size: int) -> bool:
    return getattr(_state, "on", None) is not None and x.dtype == mx.float32 \
        and size >= _MIN_SIZE


def _native_rowwise(x: mx.array) -> bool:
    """An engine pass on float32, with the extension's row-wise ops allowed and loaded."""
    on = getattr(_state, "on", None)
    return on is not None and on.rowwise and x.dtype == mx.float32


def _swiglu_dispatch(stock: Callable[..., mx.array]) -> Callable[..., mx.array]:
    def dispatch(gate: mx.array, up: mx.array) -> mx.array:
        if _native_rowwise(gate) and up.dtype == mx.float32 and up.shape == gate.shape:
            return native.silu_mul(gate, up)
        return swiglu(gate, up) if _fast(gate, gate.size) else stock(gate, up)
    dispatch.stock = stock  # type: ignore[attr-defined]
    return dispatch


def _sdpa_dispatch(stock: Callable[..., mx.array]) -> Callable[..., mx.array]:
    def dispatch(queries: mx.array, keys: mx.array, values: mx.array, cache: Any,
                 scale: float, mask: Any, sinks: mx.array | None = None) -> mx.array:
        on = getattr(_state, "on", None)
        if isinstance(cache, RaggedLayer):  # a tick's rows and chunks in one pass
            return cache.attend(queries, scale, on.tiled_from)
        usable = (on is not None and sinks is None and not hasattr(cache, "bits")
                  and queries.ndim == 4 and queries.shape[1] % keys.shape[1] == 0
                  and queries.dtype == mx.float32)
        if usable and on.attention and keys.dtype == mx.float32:
            return native.cache_attention(queries, keys, values, scale, mask,
                                          tiled_from=on.tiled_from)
        if usable and _fast(queries, queries.size // queries.shape[-1] * keys.shape[2]):
            return attention(queries, keys, values, scale, mask)
        return stock(queries, keys, values, cache, scale=scale, mask=mask, sinks=sinks)
    dispatch.stock = stock  # type: ignore[attr-defined]
    return dispatch


class _RoPE(nn.RoPE):
    """nn.RoPE whose engine passes run the native op (the rotation mx.fast.rope computes)."""

    def __call__(self, x: mx.array, offset: int | mx.array | Positions = 0) -> mx.array:
        if isinstance(offset, Positions):
            # a ragged pass, (1, H, T, D): seen as (T, H, 1, D), each token is a batch row
            # of its own at its own position (the same rotation as in a pass of its own)
            return self(x.swapaxes(0, 2), offset.array).swapaxes(0, 2)
        if not _native_rowwise(x):
            return super().__call__(x, offset)
        inv = self.__dict__.get("_inv_freq")
        if inv is None:  # once per module; not a parameter (never saved)
            inv = native.rope_inv_freq(self.dims, self.base)
            mx.eval(inv)
            object.__setattr__(self, "_inv_freq", inv)
        return native.rope(x, self.dims, traditional=self.traditional, scale=self.scale,
                           offset=offset, inv_freq=inv)


class _RMSNorm(nn.RMSNorm):
    def __call__(self, x: mx.array) -> mx.array:
        weight = self["weight"]
        if not _native_rowwise(x) or weight.dtype != mx.float32:
            return super().__call__(x)
        return native.rms_norm(x, weight, self.eps)


_ROWWISE = {nn.RoPE: _RoPE, nn.RMSNorm: _RMSNorm}


def supports_ragged(model: nn.Module) -> bool:
    """Whether this model's passes can lay a tick's rows and chunks end to end
    (engine/ragged_pass.py): installed here, every RoPE the native one, the native row-wise
    and attention kernels on (ModelRunner then checks a pass against separate ones)."""
    module = sys.modules.get(type(model).__module__)
    sdpa = getattr(module, "scaled_dot_product_attention", None)
    ropes = [m for name, m in model.named_modules() if name.rsplit(".", 1)[-1] == "rope"]
    if not (hasattr(sdpa, "stock") and ropes and all(type(m) is _RoPE for m in ropes)):
        return False
    on = _Pass()
    return on.rowwise and on.attention


def install(model: nn.Module) -> bool:
    """Route the model's SiLU and attention through the dispatchers, and its nn.RoPE and
    nn.RMSNorm modules through the native ops' subclasses; True if any was.

    Only on the CPU backend (Metal and CUDA have fast vectorized exp). Idempotent.
    """
    if mx.default_device() != mx.cpu:
        return False
    for _, mod in model.named_modules():
        if type(mod) in _ROWWISE:
            mod.__class__ = _ROWWISE[type(mod)]
    module = sys.modules.get(type(model).__module__)
    installed = False
    for name, make in (("swiglu", _swiglu_dispatch),
                       ("scaled_dot_product_attention", _sdpa_dispatch)):
        current = getattr(module, name, None)
        if current is None:
            continue
        if not hasattr(current, "stock"):
            setattr(module, name, make(current))
        installed = True
    return installed
