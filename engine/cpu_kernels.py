"""Faster exp-based ops for MLX's CPU backend, used only inside the engine's forward passes.

Why: on x86 MLX's CPU `exp` is scalar code that calls a software `fma` for each of its six
polynomial steps (about 12 ns an element, where numpy takes 0.5). SiLU and the attention
softmax are built on it, and they take about a quarter of a batched decode step and a
third of a prefill pass on the bundled model. Here the same Cephes polynomial runs with
plain multiply-adds in compiled kernels: 3-4x faster, within 1.2e-7 relative error of
MLX's own `exp` (at most one unit in the last place; 90 % of results are bit-identical).

How: `install(tree, options)` works on the engine's own copy of the model's modules
(engine/module_tree.py), never on the loaded model or on mlx / mlx-lm's classes and
modules. Each module of the architecture whose `__call__` calls mlx-lm's module-level
`swiglu` or `scaled_dot_product_attention` (llama's MLP and Attention, say) is replaced by a
module of an engine class: a subclass whose `__call__` is the architecture's own code, the
same bytecode, reading the engine's dispatchers under those names. The dispatchers take the
fast path only on the thread that is inside `active()` (the engine's forward passes), only
for float32 and only on the CPU; otherwise they call the stock function.

With the native extension (engine/native) loaded, those passes also run SiLU x up, RoPE and
RMSNorm as one native op each: MLX's CPU backend composes mx.fast.rope and mx.fast.rms_norm
from 5-15 small ops (~130 and ~35 us a call at decode, against ~5 us native), which made
them a quarter of a solo decode step. The copy's `nn.RoPE` and `nn.RMSNorm` modules are
replaced by the subclasses below, which take the native op inside the engine's passes and
call the stock one otherwise (other RoPE variants keep MLX's op). `CpuOptions.rowwise`
(BATCHCHAT_NATIVE_ROWWISE=0) turns this off.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from . import native  # the extension itself loads lazily, at the first engine pass
from .cpu_options import CpuOptions
from .module_tree import adopt, replace
from .ragged_pass import Positions, RaggedLayer

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


class _Pass:
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
    _state.on = _Pass(options)
    try:
        yield
    finally:
        _state.on = previous


def _fast(x: mx.array, size: int) -> bool:
    return getattr(_state, "on", None) is not None and x.dtype == mx.float32 \
        and size >= _MIN_SIZE


def _native_rowwise(x: mx.array) -> _Pass | None:
    """The pass, when it is an engine pass on float32 with the native row-wise ops on."""
    on = getattr(_state, "on", None)
    return on if on is not None and on.rowwise and x.dtype == mx.float32 else None


def _swiglu_dispatch(stock: Callable[..., mx.array]) -> Callable[..., mx.array]:
    def dispatch(gate: mx.array, up: mx.array) -> mx.array:
        on = _native_rowwise(gate)
        if on is not None and up.dtype == mx.float32 and up.shape == gate.shape:
            return native.silu_mul(gate, up, force_scalar=on.scalar)
        return swiglu(gate, up) if _fast(gate, gate.size) else stock(gate, up)
    return dispatch


def _sdpa_dispatch(stock: Callable[..., mx.array]) -> Callable[..., mx.array]:
    def dispatch(queries: mx.array, keys: mx.array, values: mx.array, cache: Any,
                 scale: float, mask: Any, sinks: mx.array | None = None) -> mx.array:
        on = getattr(_state, "on", None)
        if isinstance(cache, RaggedLayer):  # a tick's rows and chunks in one pass
            return cache.attend(queries, scale, on.tiled_from, on.scalar)
        usable = (on is not None and sinks is None and not hasattr(cache, "bits")
                  and queries.ndim == 4 and queries.shape[1] % keys.shape[1] == 0
                  and queries.dtype == mx.float32)
        if usable and on.attention and keys.dtype == mx.float32:
            return native.cache_attention(queries, keys, values, scale, mask,
                                          tiled_from=on.tiled_from, force_scalar=on.scalar)
        if usable and _fast(queries, queries.size // queries.shape[-1] * keys.shape[2]):
            return attention(queries, keys, values, scale, mask)
        return stock(queries, keys, values, cache, scale=scale, mask=mask, sinks=sinks)
    return dispatch


_DISPATCHERS = {"swiglu": _swiglu_dispatch,
                "scaled_dot_product_attention": _sdpa_dispatch}


class _RoPE(nn.RoPE):
    """nn.RoPE whose engine passes run the native op (the rotation mx.fast.rope computes)."""

    def __call__(self, x: mx.array, offset: int | mx.array | Positions = 0) -> mx.array:
        if isinstance(offset, Positions):
            # a ragged pass, (1, H, T, D): seen as (T, H, 1, D), each token is a batch row
            # of its own at its own position (the same rotation as in a pass of its own)
            return self(x.swapaxes(0, 2), offset.array).swapaxes(0, 2)
        if _native_rowwise(x) is None:
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
        on = _native_rowwise(x)
        if on is None or weight.dtype != mx.float32:
            return super().__call__(x)
        return native.rms_norm(x, weight, self.eps, force_scalar=on.scalar)


_ROWWISE = {nn.RoPE: _RoPE, nn.RMSNorm: _RMSNorm}
_ROUTED: dict[tuple[type, str], type] = {}  # (a model module's class, its module) -> the engine's


def _routed_class(stock: type, module: ModuleType) -> type | None:
    """The engine's class for modules of `stock` whose `__call__` (defined in the model's
    mlx-lm module) calls its swiglu / scaled_dot_product_attention: a subclass running the
    same code with the dispatchers under those names; None for any other class."""
    key = (stock, module.__name__)
    if key in _ROUTED:
        return _ROUTED[key]
    call = stock.__dict__.get("__call__")
    code = getattr(call, "__code__", None)
    names = [n for n in _DISPATCHERS if code is not None and n in code.co_names
             and call.__globals__ is vars(module) and callable(vars(module).get(n))]
    if not names:
        return None
    scope = dict(call.__globals__)  # a copy: mlx-lm's own module keeps its functions
    scope.update({n: _DISPATCHERS[n](scope[n]) for n in names})
    routed = types.FunctionType(code, scope, call.__name__, call.__defaults__,
                                call.__closure__)
    routed.__kwdefaults__ = call.__kwdefaults__
    routed.__qualname__ = f"{stock.__qualname__}.__call__"
    cls = type(stock.__name__, (stock,), {
        "__call__": routed, "__module__": __name__, "routes": frozenset(names),
        "__doc__": f"{stock.__module__}.{stock.__qualname__} with the engine's {', '.join(names)}"})
    _ROUTED[key] = cls
    return cls


def install(tree: nn.Module, options: CpuOptions = _DEFAULTS) -> bool:
    """In `tree`, the engine's own copy of a model's modules (module_tree.clone): route its
    SiLU and attention through the dispatchers and its nn.RoPE / nn.RMSNorm modules through
    the native ops' subclasses; True if the model's mlx-lm module has either function.

    Only on the CPU backend (Metal and CUDA have fast vectorized exp). Idempotent.
    `options` is unused here (each pass reads its own, `active`); kept for one signature
    with engine.native.layers.install.
    """
    del options
    if mx.default_device() != mx.cpu:
        return False
    module = sys.modules.get(type(tree).__module__)
    if module is None:
        return False

    def engine_layer(mod: nn.Module) -> nn.Module | None:
        cls = _ROWWISE.get(type(mod)) or _routed_class(type(mod), module)
        return adopt(mod, cls) if cls is not None else None

    replace(tree, engine_layer)
    return any(callable(getattr(module, n, None)) for n in _DISPATCHERS)


def supports_ragged(tree: nn.Module, options: CpuOptions) -> bool:
    """Whether this model's passes can lay a tick's rows and chunks end to end
    (engine/ragged_pass.py): installed here, attention on the dispatcher, every RoPE the
    native one, the native row-wise and attention kernels on (ModelRunner then checks a
    pass against separate ones)."""
    modules = [m for _, m in tree.named_modules()]
    ropes = [m for name, m in tree.named_modules() if name.rsplit(".", 1)[-1] == "rope"]
    routed = any("scaled_dot_product_attention" in getattr(type(m), "routes", ())
                 for m in modules)
    if not (routed and ropes and all(type(m) is _RoPE for m in ropes)):
        return False
    on = _Pass(options)
    return on.rowwise and on.attention
