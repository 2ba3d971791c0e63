"""The engine's layers for the pieces architectures other than llama bring, on the native
row-wise ops (engine/cpu_layers.py puts them in the engine's own copy of the model's tree,
beside its nn.RoPE / nn.RMSNorm ones; mlx and mlx-lm's classes are never touched).

- mlx-lm's RoPE classes that take a table of frequencies (rope_utils: Llama 3.x's scaling,
  YaRN, Phi-3's SuScaled, Gemma 4's proportional) run the same rotation as one native op
  (mx.fast.rope with `freqs` is ~130 us a call on MLX's CPU backend at decode, ~5 us native),
  and take a ragged pass's per-token positions like nn.RoPE's engine class;
- Gemma's RMSNorm (weight stored less one: mx.fast.rms_norm(x, 1 + weight)) runs the native
  RMSNorm with 1 + weight computed once;
- Gemma 2 / 3 / 4's MLP (nn.gelu_approx(gate) * up, ~10 composed ops) runs gelu_tanh_mul,
  one op, and so does Gemma 4's experts' GeGLU; Gemma 4's RMSNormNoScale the native
  RMSNorm without a weight;
- SmolLM 3's NoPE layers (no rotation) count as native RoPEs, so its model takes the ragged
  pass;
- a tied Gemma 2 / 4's final logit soft-capping (in its TiedHead) runs native.softcap.

Each runs its stock code outside the engine's passes and for anything but float32.
"""

from __future__ import annotations

import sys

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models import rope_utils

from . import cpu_kernels, native
from .module_tree import adopt
from .ragged_pass import Positions, RaggedLayer


def _cached(module: nn.Module, name: str, source: mx.array, make) -> mx.array:
    """make(source), kept on the module (not a parameter) while `source` is the same array."""
    held = module.__dict__.get(name)
    if held is None or held[0] is not source:
        value = make(source)
        mx.eval(value)
        held = (source, value)
        object.__setattr__(module, name, held)
    return held[1]


class _FreqsRoPE:
    """Mixed into an mlx-lm RoPE class whose __call__ is mx.fast.rope(x * pre on the rotated
    features, dims, traditional, base=None, scale, offset, freqs=self._freqs)."""

    def _rope_form(self) -> tuple[int, bool, float]:
        """dims, traditional, the input's pre-scale (1.0: none)."""
        raise NotImplementedError

    def _native(self, x: mx.array, offset, scale: float = 1.0) -> mx.array | None:
        if isinstance(offset, Positions):
            # a ragged pass, (1, H, T, D): seen as (T, H, 1, D), each token a batch row
            return self._native(x.swapaxes(0, 2), offset.array, scale).swapaxes(0, 2)
        if cpu_kernels.native_rowwise(x) is None:
            return None
        dims, traditional, pre = self._rope_form()
        if pre != 1.0:  # as the stock class scales its input (the same op, the same bits)
            x = x.at[..., :dims].multiply(pre)
        inv = _cached(self, "_inv_freq", self._freqs,
                      lambda f: native.rope_inv_freq(dims, None, f))
        return native.rope(x, dims, traditional=traditional, scale=scale, offset=offset,
                           inv_freq=inv)

    def __call__(self, x: mx.array, offset=0) -> mx.array:
        out = self._native(x, offset)
        return out if out is not None else super().__call__(x, offset)


class Llama3RoPE(_FreqsRoPE, rope_utils.Llama3RoPE):
    def _rope_form(self) -> tuple[int, bool, float]:
        return self.dims, self.traditional, 1.0


class ProportionalRoPE(_FreqsRoPE, rope_utils.ProportionalRoPE):
    def _rope_form(self) -> tuple[int, bool, float]:
        return self.dims, self.traditional, 1.0


class SuScaledRoPE(_FreqsRoPE, rope_utils.SuScaledRoPE):
    def _rope_form(self) -> tuple[int, bool, float]:
        return self.dim, False, self._scale


class YarnRoPE(_FreqsRoPE, rope_utils.YarnRoPE):
    def _rope_form(self) -> tuple[int, bool, float]:
        return self.dims, self.traditional, self.mscale

    def __call__(self, x: mx.array, offset=0, scale: float = 1.0,
                 inverse: bool = False) -> mx.array:
        out = None if inverse else self._native(x, offset, scale)
        return out if out is not None else rope_utils.YarnRoPE.__call__(self, x, offset, scale,
                                                                        inverse)


FREQS_ROPES: dict[type, type] = {
    rope_utils.Llama3RoPE: Llama3RoPE, rope_utils.ProportionalRoPE: ProportionalRoPE,
    rope_utils.SuScaledRoPE: SuScaledRoPE, rope_utils.YarnRoPE: YarnRoPE}

# mlx-lm modules whose RMSNorm is mx.fast.rms_norm(x, 1.0 + self.weight, self.eps), whose
# MLP is down_proj(nn.gelu_approx(gate_proj(x)) * up_proj(x)) (Gemma 4's through its
# compiled geglu, the same expression), whose RMSNormNoScale is mx.fast.rms_norm(x, None, eps)
_GEMMA_NORMS = ("mlx_lm.models.gemma", "mlx_lm.models.gemma2", "mlx_lm.models.gemma3_text")
_GEMMA_MLPS = ("mlx_lm.models.gemma2", "mlx_lm.models.gemma3_text", "mlx_lm.models.gemma4_text")
_NO_SCALE_NORMS = ("mlx_lm.models.gemma4_text",)
# mlx-lm modules whose GeGLU (a SwitchGLU's activation: Gemma 4's experts) is
# geglu(gate, x) = nn.gelu_approx(gate) * x
_GEGLUS = ("mlx_lm.models.gemma4_text",)
# RoPE stand-ins that rotate nothing (SmolLM 3's NoPE layers): any positions, a ragged
# pass's included, leave x as it is
_NO_ROPES = (("mlx_lm.models.smollm3", "NoPE"),)
# RoPEs of the engine's own that take a ragged pass's per-token positions (Qwen2-VL's M-RoPE)
_POSITIONED_ROPES = (("engine.vision.mrope", "MRoPE"),)
_MADE: dict[type, type] = {}
# the head classes below, apart from _MADE (engine_class must never hand them out)
_FINISHED: dict[type, type] = {}
_HEADED: dict[type, type] = {}


def _one_plus_norm(stock: type) -> type:
    def __call__(self, x: mx.array) -> mx.array:
        weight = self["weight"]
        on = cpu_kernels.native_rowwise(x)
        if on is None or weight.dtype != mx.float32:
            return stock.__call__(self, x)
        w = _cached(self, "_one_plus", weight, lambda w: 1.0 + w)  # as stock adds it
        return native.rms_norm(x, w, self.eps, force_scalar=on.scalar)
    return __call__


def _no_scale_norm(stock: type) -> type:
    def __call__(self, x: mx.array) -> mx.array:
        on = cpu_kernels.native_rowwise(x)
        if on is None:
            return stock.__call__(self, x)
        return native.rms_norm(x, None, self.eps, force_scalar=on.scalar)
    return __call__


def _gelu_mlp(stock: type) -> type:
    def __call__(self, x: mx.array) -> mx.array:
        gate, up = self.gate_proj(x), self.up_proj(x)  # gate first: it leads their group
        on = cpu_kernels.native_rowwise(gate)
        if on is not None and up.dtype == mx.float32 and up.shape == gate.shape:
            return self.down_proj(native.gelu_tanh_mul(gate, up, force_scalar=on.scalar))
        return self.down_proj(nn.gelu_approx(gate) * up)
    return __call__


def _geglu(stock: type) -> type:
    """Gemma 4's experts' activation module: geglu(gate, x) = nn.gelu_approx(gate) * x."""
    def __call__(self, x: mx.array, gate: mx.array) -> mx.array:
        on = cpu_kernels.native_rowwise(gate)
        if on is not None and x.dtype == mx.float32 and x.shape == gate.shape:
            return native.gelu_tanh_mul(gate, x, force_scalar=on.scalar)
        return stock.__call__(self, x, gate)
    return __call__


def _softcapped_attention(stock: type) -> type:
    """Gemma 2's attention (scores capped to cap * tanh(s / cap) before the mask) on the
    native attention kernel with its softcap; `stock` may be engine/model_fixes.py's
    subclass, whose call then runs outside the engine's passes."""
    def __call__(self, x: mx.array, mask=None, cache=None) -> mx.array:
        on = cpu_kernels.native_attention(x)
        usable = (on is not None and (mask is None or isinstance(mask, str)
                                      or mask.dtype == mx.bool_)
                  and not hasattr(cache, "bits") and not isinstance(cache, RaggedLayer))
        if not usable:
            return stock.__call__(self, x, mask=mask, cache=cache)
        B, L, _ = x.shape
        queries, keys, values = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        queries = queries.reshape(B, L, self.n_heads, -1).transpose(0, 2, 1, 3)
        keys = keys.reshape(B, L, self.n_kv_heads, -1).transpose(0, 2, 1, 3)
        values = values.reshape(B, L, self.n_kv_heads, -1).transpose(0, 2, 1, 3)
        offset = cache.offset if cache is not None else 0
        queries, keys = self.rope(queries, offset=offset), self.rope(keys, offset=offset)
        if cache is not None:
            keys, values = cache.update_and_fetch(keys, values)
        out = native.cache_attention(queries, keys, values, self.scale, mask,
                                     tiled_from=on.tiled_from, force_scalar=on.scalar,
                                     softcap=self.attn_logit_softcapping)
        return self.o_proj(out.transpose(0, 2, 1, 3).reshape(B, L, -1))
    return __call__


def engine_class(stock: type) -> type | None:
    """The engine's class for modules of an mlx-lm class this file covers, else None."""
    made = _MADE.get(stock)
    if made is not None:
        return made
    made = FREQS_ROPES.get(stock)
    home, name = stock.__module__, stock.__name__
    if made is None and name == "RMSNorm" and home in _GEMMA_NORMS:
        make = _one_plus_norm
    elif made is None and name == "MLP" and home in _GEMMA_MLPS:
        make = _gelu_mlp
    elif made is None and name == "RMSNormNoScale" and home in _NO_SCALE_NORMS:
        make = _no_scale_norm
    elif made is None and name == "GeGLU" and home in _GEGLUS:
        make = _geglu
    elif made is None and _is_gemma2_attention(stock):
        make, home = _softcapped_attention, "mlx_lm.models.gemma2"
    else:
        make = None
    if make is not None and sys.modules.get(home) is not None:
        made = type(name, (stock,), {"__call__": make(stock), "__module__": __name__,
                                     "__qualname__": f"{home.rsplit('.', 1)[-1]}.{name}",
                                     "__doc__": f"{home}.{name} on the native row-wise ops"})
    if made is not None:
        _MADE[stock] = made
    return made


class TiedHead(nn.Module):
    """A tied model's output head as its own `__call__` does it after the inner model: the
    embedding's as_linear, then the architecture's finish (Gemma 2/4's final logit
    soft-capping, Granite's logit scaling), the same ops. Put in the engine's copy as its
    `lm_head` (no parameters: the embedding is read through the inner model at each call,
    after the native layers replaced it), so ModelRunner's output head is found and a
    prompt chunk's logits are made for its last position only, not all of them."""

    def __init__(self, inner: nn.Module, finish) -> None:
        super().__init__()
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_finish", finish)

    def __call__(self, x: mx.array) -> mx.array:
        return self._finish(self._inner.embed_tokens.as_linear(x))


def _head_finish(tree: nn.Module, tied: bool = True):
    """What a tied (or, `tied` False, untied) mlx-lm model's `__call__` does to its head's
    logits, where this file knows it; None for any other model."""
    home = type(tree).__module__
    if type(tree).__name__ != "Model" or ("lm_head" in tree) == tied:
        return None
    if home == "mlx_lm.models.gemma2":
        cap = tree.final_logit_softcapping
        return _softcap(cap, lambda out: mx.tanh(out / cap) * cap)
    if home == "mlx_lm.models.gemma4_text" and tree.final_logit_softcapping is not None:
        softcap, cap = sys.modules[home].logit_softcap, tree.final_logit_softcapping
        return _softcap(cap, lambda out: softcap(cap, out))
    if home == "mlx_lm.models.granite":
        return lambda out: out / tree.logits_scaling
    return None


def _softcap(cap: float, stock):
    """The final logit soft-capping, cap * tanh(logits / cap): inside an engine pass one
    native op (MLX's CPU tanh over a vocabulary a row is several composed passes), within
    2.5e-7 * cap of the stock op's value; `stock` outside."""
    def finish(out: mx.array) -> mx.array:
        on = cpu_kernels.native_rowwise(out)
        if on is None:
            return stock(out)
        return native.softcap(out, cap, force_scalar=on.scalar)
    return finish


def add_tied_head(tree: nn.Module) -> bool:
    """The engine's copy of a tied Gemma 2 / Gemma 4 / Granite model gets a TiedHead as its
    `lm_head`, and its root the class of `_headed` (its own call through that head, so a
    decode step's soft-capping is the head's native one too); True if it did."""
    finish = _head_finish(tree)
    if finish is None or not isinstance(tree.get("model"), nn.Module):
        return False
    tree["lm_head"] = TiedHead(tree["model"], finish)
    # in place: the caller (ModelRunner) holds this very root; only the engine's copy
    # changes class, mlx-lm's Model and the loaded model stay as they are
    tree.__class__ = _headed(type(tree))
    return True


def finish_untied_head(tree: nn.Module) -> bool:
    """An untied Granite / Gemma 4's engine copy: its `lm_head` (the engine's linear by now)
    becomes a subclass that finishes its logits as the model's call does (Granite's
    scaling, Gemma 4's soft-capping, native in an engine pass), and its root calls it as
    the tied ones do, so ModelRunner finds the output head (a prompt chunk's logits for its
    last position only). The head keeps its arrays under their names; True if done."""
    finish = _head_finish(tree, tied=False)
    head, inner = tree.get("lm_head"), tree.get("model")
    if finish is None or not isinstance(head, nn.Module) or not isinstance(inner, nn.Module):
        return False
    new = adopt(head, _finished(type(head)))
    object.__setattr__(new, "_finish", finish)
    tree["lm_head"] = new
    tree.__class__ = _headed(type(tree))  # in place, as add_tied_head
    return True


def _finished(stock: type) -> type:
    """A head class whose call is the stock call, then the model's finish."""
    made = _FINISHED.get(stock)
    if made is None:
        def __call__(self, x: mx.array) -> mx.array:
            return self._finish(stock.__call__(self, x))
        made = type(stock.__name__, (stock,), {
            "__call__": __call__, "__module__": __name__,
            "__doc__": f"{stock.__module__}.{stock.__name__} with its model's logit finish"})
        _FINISHED[stock] = made
    return made


def _headed(stock: type) -> type:
    """A tied model's class whose call is its inner model then its `lm_head` (the TiedHead:
    as_linear and the stock finish, the same ops as the stock call)."""
    made = _HEADED.get(stock)
    if made is None:
        def __call__(self, inputs: mx.array, cache=None, **kwargs) -> mx.array:
            return self.lm_head(self.model(inputs, cache, **kwargs))
        made = type(stock.__name__, (stock,), {
            "__call__": __call__, "__module__": __name__,
            "__qualname__": f"{stock.__module__.rsplit('.', 1)[-1]}.{stock.__name__}",
            "__doc__": f"{stock.__module__}.{stock.__name__} through its TiedHead"})
        _HEADED[stock] = made
    return made


def _is_gemma2_attention(stock: type) -> bool:
    """mlx-lm's Gemma 2 attention or a subclass of it (engine/model_fixes.py's)."""
    gemma2 = sys.modules.get("mlx_lm.models.gemma2")
    return gemma2 is not None and issubclass(stock, gemma2.Attention)


def is_native_rope(module: nn.Module) -> bool:
    """A RoPE module of this file's, or one that rotates nothing (a ragged pass takes both)."""
    cls = type(module)
    return (cls in FREQS_ROPES.values() or (cls.__module__, cls.__name__) in _NO_ROPES
            or (cls.__module__, cls.__name__) in _POSITIONED_ROPES)
