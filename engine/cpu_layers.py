"""The engine's own layers for its CPU kernels, put in its own copy of the model's modules.

`install(tree)` works on that copy (engine/module_tree.py: the same arrays under the same
names), never on the loaded model or on mlx / mlx-lm's classes and modules:

- each module of the architecture whose `__call__` calls mlx-lm's module-level `swiglu` or
  `scaled_dot_product_attention` (llama's MLP and Attention, say) becomes a module of an
  engine class: a subclass whose `__call__` is the architecture's own code (the same
  bytecode, so the same graph) reading engine.cpu_kernels' dispatchers under those names;
- `nn.RoPE` and `nn.RMSNorm` modules become the subclasses below, which run one native op
  inside the engine's passes (MLX's CPU backend composes mx.fast.rope and mx.fast.rms_norm
  from 5-15 small ops: ~130 and ~35 us a call at decode, against ~5 us native, which made
  them a quarter of a solo decode step) and the stock op otherwise;
- the pieces other architectures bring (mlx-lm's RoPE classes with a frequency table, such
  as Llama 3.x's; Gemma's RMSNorm of 1 + weight and GELU-tanh MLP) become the classes of
  engine/cpu_arch_layers.py, on the same native ops.
`CpuOptions.rowwise` (BATCHCHAT_NATIVE_ROWWISE=0) turns the native ops off.
"""

from __future__ import annotations

import sys
import types
from types import ModuleType

import mlx.core as mx
import mlx.nn as nn

from . import cpu_arch_layers, cpu_kernels, native
from .cpu_options import CpuOptions
from .module_tree import adopt, replace
from .ragged_pass import Positions


class _RoPE(nn.RoPE):
    """nn.RoPE whose engine passes run the native op (the rotation mx.fast.rope computes)."""

    def __call__(self, x: mx.array, offset: int | mx.array | Positions = 0) -> mx.array:
        if isinstance(offset, Positions):
            # a ragged pass, (1, H, T, D): seen as (T, H, 1, D), each token is a batch row
            # of its own at its own position (the same rotation as in a pass of its own)
            return self(x.swapaxes(0, 2), offset.array).swapaxes(0, 2)
        if cpu_kernels.native_rowwise(x) is None:
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
        on = cpu_kernels.native_rowwise(x)
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
    names = [n for n in cpu_kernels.DISPATCHERS if code is not None and n in code.co_names
             and call.__globals__ is vars(module) and callable(vars(module).get(n))]
    if not names:
        return None
    scope = dict(call.__globals__)  # a copy: mlx-lm's own module keeps its functions
    scope.update({n: cpu_kernels.DISPATCHERS[n](scope[n]) for n in names})
    routed = types.FunctionType(code, scope, call.__name__, call.__defaults__,
                                call.__closure__)
    routed.__kwdefaults__ = call.__kwdefaults__
    routed.__qualname__ = f"{stock.__qualname__}.__call__"
    cls = type(stock.__name__, (stock,), {
        "__call__": routed, "__module__": __name__, "routes": frozenset(names),
        "__doc__": f"{stock.__module__}.{stock.__qualname__} with the engine's {', '.join(names)}"})
    _ROUTED[key] = cls
    return cls


def install(tree: nn.Module) -> bool:
    """In `tree`, the engine's own copy of a model's modules (module_tree.clone): route its
    SiLU and attention through the dispatchers and its nn.RoPE / nn.RMSNorm modules through
    the native ops' subclasses; True if some module was replaced or the model's mlx-lm
    module has either function.

    Only on the CPU backend (Metal and CUDA have fast vectorized exp). Idempotent. What
    each pass may use is `CpuOptions`, read when the pass starts (cpu_kernels.active).
    """
    if mx.default_device() != mx.cpu:
        return False
    module = sys.modules.get(type(tree).__module__)
    if module is None:
        return False

    modules = {module}

    def engine_layer(mod: nn.Module) -> nn.Module | None:
        cls = (_ROWWISE.get(type(mod)) or cpu_arch_layers.engine_class(type(mod))
               or _routed_class(type(mod), module))
        if cls is None:
            # a layer the architecture's module takes from another mlx-lm module (Qwen 3.5's
            # attention and MLP are qwen3_next's): routed with that module's functions
            home = sys.modules.get(type(mod).__module__)
            if home is not None and home is not module and _is_mlx_lm_model(home):
                cls = _routed_class(type(mod), home)
                if cls is not None:
                    modules.add(home)
        return adopt(mod, cls) if cls is not None else None

    # True as well where only the row-wise layers went in (Gemma 2's attention is its own)
    replaced = replace(tree, engine_layer) + cpu_arch_layers.add_tied_head(tree)
    return replaced > 0 or any(callable(getattr(m, n, None)) for m in modules
                               for n in cpu_kernels.DISPATCHERS)


def _is_mlx_lm_model(module: ModuleType) -> bool:
    return module.__name__.startswith("mlx_lm.models.")


def reads_packed_kv(tree: nn.Module, options: CpuOptions) -> bool:
    """Whether every attention of this model (each module holding a `rope`) runs through
    the dispatcher with the native kernel on, which reads quantized KV rows as they are
    stored (engine/kv_quant.py); otherwise (Gemma 2's attention of its own, a GPU) the
    rows are dequantized for it."""
    holders = {name.rsplit(".", 1)[0] for name, _ in tree.named_modules()
               if name.rsplit(".", 1)[-1] == "rope" and "." in name}
    modules = dict(tree.named_modules())
    routed = [("scaled_dot_product_attention" in getattr(type(modules[n]), "routes", ()))
              for n in holders if n in modules]
    return bool(routed) and all(routed) and cpu_kernels.Pass(options).attention


def supports_ragged(tree: nn.Module, options: CpuOptions) -> bool:
    """Whether this model's passes can lay a tick's rows and chunks end to end
    (engine/ragged_pass.py): installed here, attention on the dispatcher, every RoPE the
    native one, the native row-wise and attention kernels on (ModelRunner then checks a
    pass against separate ones)."""
    modules = [m for _, m in tree.named_modules()]
    ropes = [m for name, m in tree.named_modules() if name.rsplit(".", 1)[-1] == "rope"]
    routed = any("scaled_dot_product_attention" in getattr(type(m), "routes", ())
                 for m in modules)
    native_ropes = all(type(m) is _RoPE or cpu_arch_layers.is_native_rope(m) for m in ropes)
    if not (routed and ropes and native_ropes):
        return False
    on = cpu_kernels.Pass(options)
    return on.rowwise and on.attention
