"""A mixture-of-experts model's experts on the packed kernel, grouped by expert (issue #48 (3)).

mlx-lm runs stacked experts (QuantizedSwitchLinear; the loader's Group16SwitchLinear for
GGUF's Q6_K / Q2_K) with `mx.gather_qmm` (or a whole dequantized copy of every expert per
call, for groups of 16), which on MLX's CPU backend computes each (row, expert) pair on
its own. Here, in the engine's copy of the model (engine/module_tree.py), they become
subclasses holding a packed copy of the experts (the loader's, where it decoded a GGUF's
experts straight into that layout: engine/loader/packed_form.py; else `pack_experts`, made
at install): a call sorts the pairs of its rows by expert and runs each expert's rows as
one packed int8 product (`packed_experts_matvec`, one op; src/packed.h). A pair's bits
depend only on its own row, so a row's answer is the same whichever rows share its expert,
alone or batched, in a prompt chunk or a decode step (the engine's same-answer guarantee).

mlx-lm's SwitchGLU becomes a subclass whose gate and up projections run as one such op
(one rounding of x to int8, one job for the threads). Outside float32 or the layouts the
kernel takes, each runs its stock code. Installed by engine/native/layers.py, on the CPU.
"""

from __future__ import annotations

import math

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models import switch_layers

from ..loader.ggml_modules import Group16SwitchLinear
from ..loader.packed_form import AFFINE, PANEL, prepacked
from . import extension, moe_blocks, simd

_STOCK = (switch_layers.QuantizedSwitchLinear, Group16SwitchLinear)
_MADE: dict[type, type] = {}


class _PackedExperts:
    """Mixed into a stacked-experts class: its packed copy and the grouped call."""

    _experts_packed: list[mx.array] | None = None
    _experts_scalar: bool = False
    _experts_form: int = AFFINE  # src/packed.h's Form of the packed copy
    _experts_layout: tuple[int, int] = (0, 0)  # the kernel's (group size, bits) for it

    def grouped(self, x: mx.array, indices: mx.array) -> mx.array | None:
        """The stock call's result through the grouped op, or None where it cannot run."""
        outs = grouped_call((self,), x, indices)
        return outs[0] if outs is not None else None

    def __call__(self, x: mx.array, indices: mx.array, sorted_indices: bool = False) -> mx.array:
        out = self.grouped(x, indices)
        if out is None:
            return super().__call__(x, indices, sorted_indices=sorted_indices)
        return out


def _pairs(x: mx.array, indices: mx.array) -> tuple[int, int, int] | None:
    """(M, X, k) when gather_qmm's broadcast of x (..., X, 1, K) with indices (..., k) is
    rows M = the leading size, each with X = 1 or k input rows: the forms SwitchGLU makes
    (x expanded for gate/up, one row per slot for down, the sorted flat form)."""
    xb, ib = x.shape[:-2], indices.shape
    if x.ndim < 3 or x.shape[-2] != 1 or len(xb) != len(ib) or xb[:-1] != ib[:-1]:
        return None
    k = ib[-1]
    if xb[-1] not in (1, k):
        return None
    return math.prod(ib[:-1]), xb[-1], k


EACH_PAIR, SWIGLU, WEIGHTED_SUM = 0, 1, 2  # src/packed.h's ExpertsOut


def grouped_call(members: tuple, x: mx.array, indices: mx.array, out: int = EACH_PAIR,
                 slot_weights: mx.array | None = None) -> list[mx.array] | None:
    """Each member's stock output for (x, indices) from one grouped op (members share x's
    K, their group size, bits and expert count), or None where the op cannot run. `out`
    SWIGLU: [silu(gate) * up] of two members; WEIGHTED_SUM: [(..., N)], each row's k
    outputs summed in slot order weighted by `slot_weights` (indices' shape); neither
    with expert biases (None)."""
    first = members[0]
    if first._experts_packed is None or x.dtype != mx.float32 or \
            any(m._experts_packed is None or m._experts_form != first._experts_form
                for m in members):
        return None
    form = _pairs(x, indices)
    if form is None:
        return None
    m, rows, k = form
    experts = first["weight"].shape[0]
    ns = [mem["weight"].shape[1] for mem in members]
    group_size, bits = first._experts_layout
    if out != EACH_PAIR and any("bias" in mem for mem in members):
        return None
    outs = extension().packed_experts_matvec(
        x.reshape(m, rows, x.shape[-1]), indices.reshape(m, k),
        [a for mem in members for a in mem._experts_packed], ns, experts, group_size, bits,
        force_scalar=first._experts_scalar, form=first._experts_form, out=out,
        slot_weights=None if slot_weights is None else slot_weights.reshape(m, k))
    if out == SWIGLU:
        return [outs[0].reshape(*indices.shape, 1, ns[0])]
    if out == WEIGHTED_SUM:
        return [outs[0].reshape(*indices.shape[:-1], ns[0])]
    result = []
    for mem, out, n in zip(members, outs, ns, strict=True):
        y = out.reshape(*indices.shape, 1, n)
        if "bias" in mem:
            y = y + mx.expand_dims(mem["bias"][indices], -2)
        result.append(y)
    return result


def _same_form(a: nn.Module, b: nn.Module) -> bool:
    return (a.group_size == b.group_size and a.bits == b.bits
            and a["weight"].shape[0] == b["weight"].shape[0]
            and a["weight"].shape[2] == b["weight"].shape[2])


class SwitchGLU(switch_layers.SwitchGLU):
    """mlx-lm's SwitchGLU with its gate and up projections in one grouped op (no sort by
    hand: the op groups the pairs by expert whatever their number)."""

    def __call__(self, x: mx.array, indices: mx.array) -> mx.array:
        gate, up, down = self.gate_proj, self.up_proj, self.down_proj
        if not (isinstance(gate, _PackedExperts) and isinstance(up, _PackedExperts)
                and isinstance(down, _PackedExperts) and _same_form(gate, up)):
            return super().__call__(x, indices)
        x = mx.expand_dims(x, (-2, -3))
        indices = mx.stop_gradient(indices)
        both = grouped_call((gate, up), x, indices)
        if both is None:
            return super().__call__(x.squeeze((-2, -3)), indices)
        x_gate, x_up = both
        return down(self.activation(x_up, x_gate), indices).squeeze(-2)

    def weighted(self, x: mx.array, indices: mx.array, scores: mx.array) -> mx.array | None:
        """(self(x, indices) * scores[..., None]).sum(axis=-2) in two grouped ops (gate and
        up with SwiGLU on the way out; down with the weighted sum of the k slots on the way
        out, in slot order), or None where they cannot run: an activation other than
        mlx-lm's SwiGLU, expert biases, a form the op does not take. Down's form may be
        another than gate's and up's (llama.cpp's Q4_K_M gives half the layers' down Q6_K):
        each op runs its own members' form."""
        gate, up, down = self.gate_proj, self.up_proj, self.down_proj
        if not (isinstance(self.activation, switch_layers.SwiGLU)
                and isinstance(gate, _PackedExperts) and isinstance(up, _PackedExperts)
                and isinstance(down, _PackedExperts) and _same_form(gate, up)
                and gate["weight"].shape[1] == up["weight"].shape[1]
                and scores.dtype == mx.float32 and scores.shape == indices.shape):
            return None
        indices = mx.stop_gradient(indices)
        act = grouped_call((gate, up), mx.expand_dims(x, (-2, -3)), indices, SWIGLU)
        if act is None:
            return None
        out = grouped_call((down,), act[0], indices, WEIGHTED_SUM, scores)
        return None if out is None else out[0]


def _engine_class(stock: type) -> type:
    made = _MADE.get(stock)
    if made is None:
        made = type(stock.__name__, (_PackedExperts, stock), {
            "__module__": __name__,
            "__doc__": f"{stock.__module__}.{stock.__qualname__} grouped by expert on the "
                       "packed kernel"})
        _MADE[stock] = made
    return made


def _packable(mod: nn.Module) -> bool:
    weight, biases = mod["weight"], mod.get("biases")
    return (getattr(mod, "mode", "affine") == "affine" and mod.bits in (4, 8)
            and mod.group_size in (16, 32, 64) and biases is not None
            and weight.ndim == 3 and weight.dtype == mx.uint32
            and (weight.shape[2] * 32 // mod.bits) % 32 == 0)


def engine_module(mod: nn.Module, scalar: bool) -> nn.Module | None:
    """The engine's module for a stacked-experts layer (its packed copy made now), a
    SwitchGLU or a MoE block (engine/native/moe_blocks.py); None for any other module or a
    layout the kernel does not take."""
    from ..module_tree import adopt

    block = moe_blocks.engine_module(mod)
    if block is not None:
        return block
    if type(mod) is switch_layers.SwitchGLU:
        return adopt(mod, SwitchGLU)
    if type(mod) not in _STOCK or not _packable(mod):
        return None
    new = adopt(mod, _engine_class(type(mod)))
    experts, n = mod["weight"].shape[:2]
    made = prepacked(mod)  # the loader's one copy (its arrays are lazy views of it)
    form, layout = AFFINE, (mod.group_size, mod.bits)
    if made is not None and made.weight.shape[0] == experts * -(-n // PANEL) * PANEL:
        packed = made.arrays()
        form, layout = made.form, made.kernel_layout(mod.group_size, mod.bits)
    else:
        packed = extension().pack_experts(mod["weight"], mod["scales"], mod["biases"],
                                          mod.group_size, mod.bits)
    object.__setattr__(new, "_experts_packed", list(packed))
    object.__setattr__(new, "_experts_form", form)
    object.__setattr__(new, "_experts_layout", layout)
    object.__setattr__(new, "_experts_scalar", scalar or not simd())
    return new
