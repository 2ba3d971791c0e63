"""The engine's quantized layers: a quantized model's linears on the native kernels (issue #19).

`install(tree, options)` replaces, in the engine's own copy of the model's modules
(engine/module_tree.py), every ``nn.QuantizedLinear`` (and the ``nn.QuantizedEmbedding``
whose `as_linear` is a tied lm_head) whose layout the kernel handles by a
NativeQuantizedLinear / NativeQuantizedEmbedding holding the same arrays under the same
names. A call with at most the row limit of input on the CPU runs the native kernel; larger
inputs (prefill and big batches, only with BATCHCHAT_INVARIANT=0) use a float32 matmul
(BLAS), which beats a matrix-vector kernel there: on the weight dequantized per call
(native, not MLX's slow CPU dequantize), or on a float32 copy kept at install
(`CpuOptions.float32_copies`). With batch invariance (the default) and int8 activations a
packed copy of each weight takes every call, any row count (src/packed.h).

A mixture-of-experts model's stacked experts (and their SwitchGLU) go on the packed kernel
grouped by expert (engine/native/switch_layers.py), with the packed kernel's switches.

Sibling projections that read one input (a layer's q/k/v, its gate/up) share a
ProjectionGroup: the first one called computes all of them in one op (one preparation of x,
one job for the threads) and the group hands the others theirs.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn

from .. import cpu_arch_layers
from ..cpu_options import CpuOptions
from ..loader.ggml_modules import Group16Embedding, Group16Linear, dequantize_groups
from ..loader.packed_form import AFFINE, lookup, prepacked
from ..module_tree import replace
from . import available, dequantize_f32, extension, float_layers, simd, switch_layers

# The lm_head (49152 x 576, 8-bit) stays on the kernel longer: dequantizing it costs more
# than the float32 matmul gains until ~128 rows.
LM_HEAD_MIN_ROWS = 128
SIBLINGS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


class ProjectionGroup:
    """Projections of one input computed together: the leader (the first) computes all and
    keeps each follower's output here until that follower takes it for that very input."""

    __slots__ = ("layouts", "members", "ready")

    def __init__(self, members: tuple[NativeQuantizedLinear, ...]) -> None:
        self.members = members
        self.ready: list[tuple[mx.array, mx.array] | None] = [None] * len(members)
        # each member's packed (group size, bits, form) where they differ (a Q4_K_M file's
        # Q6_K v beside Q4_K q and k: one packed call, each weight read in its own form)
        each = [(*m._packed_layout, m._packed_form) for m in members]
        self.layouts = [v for layout in each for v in layout] if len(set(each)) > 1 else []

    def take(self, index: int, x: mx.array) -> mx.array | None:
        """Follower `index`'s output for `x` if the leader computed it (taken once)."""
        ready, self.ready[index] = self.ready[index], None
        return ready[1] if ready is not None and ready[0] is x else None

    def hand_out(self, x: mx.array, outs: list[mx.array]) -> mx.array:
        for i, out in enumerate(outs[1:], 1):
            self.ready[i] = (x, out)
        return outs[0]


class _NativeQuantized(nn.Module):
    """A stock quantized layer's arrays under its names (weight, scales, biases, bias), its
    layout, and what the kernel needs (not parameters: never saved)."""

    def __init__(self, stock: nn.Module, max_rows: int, options: CpuOptions) -> None:
        super().__init__()
        for key, value in stock.items():  # the same names, in the same order
            self[key] = value
        self.group_size, self.bits = stock.group_size, stock.bits
        self.mode = getattr(stock, "mode", "affine")
        self.freeze()
        # object.__setattr__: arrays set as attributes would become parameters
        object.__setattr__(self, "_native_max_rows", max_rows)
        object.__setattr__(self, "_native_int8", options.int8)
        object.__setattr__(self, "_native_qmv", extension().quantized_matvec)
        object.__setattr__(self, "_native_scalar", options.scalar or not simd())
        f32 = None
        if options.float32_copies and self.group_size != 16:
            f32 = dequantize_f32(self.weight, self.scales, self.biases, self.group_size,
                                 self.bits)
            mx.eval(f32)
        object.__setattr__(self, "_native_f32", f32)
        pk = None
        # the loader's copy when it decoded the GGUF straight into the packed layout (its
        # weight/scales/biases are then lazy views of it: loader/packed_form.py); Q4_K and
        # Q6_K in forms of their own, with the kernel's group size and bits
        made = prepacked(stock)
        object.__setattr__(self, "_prepacked", made)
        if (options.invariant and options.int8
                and self.weight.shape[1] * 32 // self.bits % 32 == 0):
            pk = made.arrays() if made is not None else extension().pack_quantized(
                self.weight, self.scales, self.biases, self.group_size, self.bits)
        object.__setattr__(self, "_native_packed", pk)
        use_made = pk is not None and made is not None
        object.__setattr__(self, "_packed_form", made.form if use_made else AFFINE)
        object.__setattr__(self, "_packed_layout", made.kernel_layout(
            self.group_size, self.bits) if use_made else (self.group_size, self.bits))
        object.__setattr__(self, "_native_n", self.weight.shape[0])
        object.__setattr__(self, "_group", None)
        object.__setattr__(self, "_index", 0)

    def _take(self, x: mx.array) -> mx.array | None:
        group = self._group
        return group.take(self._index, x) if group is not None and self._index else None

    def _leads(self) -> ProjectionGroup | None:
        return self._group if self._group is not None and self._index == 0 else None

    def _packed(self, x: mx.array) -> mx.array:
        """The packed int8 kernel: every row count, one arithmetic (batch invariance)."""
        handed = self._take(x)
        if handed is not None:
            return handed
        group = self._leads()
        members = group.members if group is not None else (self,)
        group_size, bits = self._packed_layout
        outs = extension().packed_matvec_many(
            x, [a for m in members for a in m._native_packed], [m._native_n for m in members],
            group_size, bits, force_scalar=self._native_scalar, form=self._packed_form,
            layouts=group.layouts if group is not None else [])
        return group.hand_out(x, outs) if group is not None else outs[0]

    def _matmul(self, x: mx.array) -> mx.array:
        """x @ W.T for the layer's quantized W, the fastest way for this many rows."""
        if x.dtype == mx.float32 and x.ndim and self._native_packed is not None:
            return self._packed(x)
        if x.dtype == mx.float32 and x.ndim and x.size <= self._native_max_rows * x.shape[-1]:
            handed = self._take(x)
            if handed is not None:
                return handed
            group = self._leads()
            if group is not None:
                outs = extension().quantized_matvec_many(
                    x, [a for m in group.members for a in (m.weight, m.scales, m.biases)],
                    self.group_size, self.bits, force_scalar=self._native_scalar,
                    int8_x=self._native_int8)
                return group.hand_out(x, outs)
            # the extension's own function: this runs ~100-200 times a decode step
            return self._native_qmv(x, self.weight, self.scales, self.biases, self.group_size,
                                    self.bits, force_scalar=self._native_scalar,
                                    int8_x=self._native_int8)
        f32 = self._native_f32
        if f32 is not None and x.dtype == mx.float32:
            return x @ f32.T
        if x.dtype == mx.float32:
            w = dequantize_f32(self.weight, self.scales, self.biases, self.group_size,
                               self.bits)
            return x @ w.T
        return mx.quantized_matmul(x, self.weight, self.scales, self.biases, transpose=True,
                                   group_size=self.group_size, bits=self.bits)


class NativeQuantizedLinear(_NativeQuantized):
    def __call__(self, x: mx.array) -> mx.array:
        y = self._matmul(x)
        if "bias" in self:
            y = y + self["bias"]
        return y


class NativeQuantizedEmbedding(_NativeQuantized):
    def __init__(self, stock: nn.Module, max_rows: int, options: CpuOptions) -> None:
        super().__init__(stock, max_rows, options)
        self.num_embeddings, self.dims = stock.num_embeddings, stock.dims

    def __call__(self, x: mx.array) -> mx.array:  # nn.QuantizedEmbedding's lookup
        if self._prepacked is not None:  # the same rows, from the packed copy
            w, s, b = lookup(self._prepacked, x, self.bits, self["scales"].dtype)
        else:
            w, s, b = self["weight"][x], self["scales"][x], self["biases"][x]
        if self.group_size == 16:
            return dequantize_groups(w, s, b, 16, self.bits)
        return mx.dequantize(w, scales=s, biases=b, group_size=self.group_size,
                             bits=self.bits, mode=self.mode)

    def as_linear(self, x: mx.array) -> mx.array:
        return self._matmul(x)


def _supported(mod: nn.Module) -> bool:
    return (getattr(mod, "mode", "affine") == "affine" and mod.bits in (4, 8)
            and mod.group_size in (32, 64) and mod.get("biases") is not None)


def install(tree: nn.Module, options: CpuOptions) -> int:
    """Replace the supported quantized layers below `tree` (the engine's own copy: a
    module_tree.clone) by the native ones; returns how many (0 when the kernel is unusable
    or switched off, `CpuOptions.qmv_rows`).

    Memory: with `float32_copies` the float32 model on top of the quantized one (bundled
    model: +540 MB to ~100 MB); with the packed kernel one more copy of the quantized weights.
    """
    max_rows = options.qmv_rows()
    if max_rows == 0 or not available():
        return 0

    packs = options.invariant and options.int8  # the one kernel for groups of 16

    def native(mod: nn.Module) -> nn.Module | None:
        if (type(mod) is nn.QuantizedLinear and _supported(mod)) or \
                (type(mod) is Group16Linear and packs):
            return NativeQuantizedLinear(mod, max_rows, options)
        if (type(mod) is nn.QuantizedEmbedding and _supported(mod)) or \
                (type(mod) is Group16Embedding and packs):
            return NativeQuantizedEmbedding(mod, max(max_rows, LM_HEAD_MIN_ROWS), options)
        # a MoE model's stacked experts, grouped by expert on the packed kernel
        if packs and (experts := switch_layers.engine_module(mod, options.scalar)):
            return experts
        # an unquantized linear (a GGUF's F32/F16/BF16 tensors): the fixed-order float kernel
        return float_layers.engine_module(mod, options)

    count = replace(tree, native)
    _group_siblings(tree)
    # an untied Granite / Gemma 4's head finished as its model's call does (so it is found)
    cpu_arch_layers.finish_untied_head(tree)
    return count


def _group_siblings(tree: nn.Module) -> None:
    """A ProjectionGroup for each SIBLINGS set whose members are all native with one layout,
    or all on the packed kernel (which reads each weight in its own layout)."""
    for _, parent in tree.named_modules():
        for names in SIBLINGS:
            members = tuple(parent.get(n) for n in names)
            if not all(type(m) is NativeQuantizedLinear for m in members):
                continue
            first = members[0]
            packed = all(m._native_packed is not None for m in members)
            if all((packed or (m.group_size == first.group_size and m.bits == first.bits
                               and m.scales.dtype == first.scales.dtype
                               and m._packed_form == first._packed_form))
                   and m.weight.shape[1] * 32 // m.bits
                   == first.weight.shape[1] * 32 // first.bits
                   and m._native_max_rows == first._native_max_rows
                   and (m._native_packed is None) == (first._native_packed is None)
                   for m in members):
                group = ProjectionGroup(members)
                for i, m in enumerate(members):
                    object.__setattr__(m, "_group", group)
                    object.__setattr__(m, "_index", i)
