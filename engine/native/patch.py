"""Route a quantized model's small-batch linears through quantized_matvec (the engine's
CPU default since issue #19; BATCHCHAT_NATIVE_QMV=0 turns it off).

`install(model, max_rows)` re-classes every ``nn.QuantizedLinear`` (and the tied
``nn.QuantizedEmbedding.as_linear`` used as lm_head) whose layout the kernel handles, so a
call with at most `max_rows` rows of input on the CPU runs the native kernel; larger inputs
(prefill, big batches) use a float32 matmul (BLAS), which beats a matrix-vector kernel
there: on the weight dequantized per call (native, not MLX's slow CPU dequantize), which
keeps no copy, or on a float32 copy kept at install (`keep_float32`,
BATCHCHAT_NATIVE_QMV_F32=1).
Parameters, names and saved weights are unchanged; `uninstall(model)` restores the original classes.
"""

from __future__ import annotations

import os

import mlx.core as mx
import mlx.nn as nn

from ..determinism import invariant_from_env
from . import available, dequantize_f32, extension, simd

ENABLE_ENV = "BATCHCHAT_NATIVE_QMV"  # "0": off; unset or "1": default max rows; a number
KEEP_F32_ENV = "BATCHCHAT_NATIVE_QMV_F32"  # "1": float32 copies for large batches
INT8_ENV = "BATCHCHAT_NATIVE_INT8"  # "0": exact float32 activations (default: int8)
DEFAULT_MAX_ROWS = 32  # crossover with float32 BLAS is 32..48 rows (docs/kernels.md)
INT8_MAX_ROWS = 64  # with int8 activations the kernel still beat it at 64 (321 vs 370 ms)
# The lm_head (49152 x 576, 8-bit) stays on the kernel longer: dequantizing it costs more
# than the float32 matmul gains until ~128 rows.
LM_HEAD_MIN_ROWS = 128
# Batch invariance (engine/determinism.py): every row count on the kernel, so a row's
# output never depends on how many rows share the call.
ALL_ROWS = 1 << 40


def _supported(mod: nn.Module) -> bool:
    return (getattr(mod, "mode", "affine") == "affine" and mod.bits in (4, 8)
            and mod.group_size in (32, 64) and getattr(mod, "biases", None) is not None)


# Sibling projections that read the same input: the first one called computes all of them
# in one op (one preparation of x, one job for the threads) and hands the others theirs.
SIBLINGS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


def _handed(mod: nn.Module, x: mx.array) -> mx.array | None:
    """The output a sibling's leader computed for this very input, if any (taken once)."""
    ready = mod.__dict__.get("_native_ready")
    if ready is None:
        return None
    mod.__dict__["_native_ready"] = None
    return ready[1] if ready[0] is x else None


def _packed(mod: nn.Module, x: mx.array) -> mx.array:
    """The packed int8 kernel: every row count, one arithmetic (batch invariance)."""
    handed = _handed(mod, x)
    if handed is not None:
        return handed
    group = mod.__dict__.get("_native_group") or (mod,)
    outs = extension().packed_matvec_many(
        x, [a for m in group for a in m._native_packed], [m._native_n for m in group],
        mod.group_size, mod.bits, force_scalar=mod._native_scalar)
    for member, out in zip(group[1:], outs[1:], strict=True):
        member.__dict__["_native_ready"] = (x, out)
    return outs[0]


def _matmul(mod: nn.Module, x: mx.array) -> mx.array:
    """x @ W.T for the module's quantized W, the fastest way for this many rows."""
    if x.dtype == mx.float32 and x.ndim and mod.__dict__.get("_native_packed") is not None:
        return _packed(mod, x)
    if x.dtype == mx.float32 and x.ndim and x.size <= mod._native_max_rows * x.shape[-1]:
        handed = _handed(mod, x)
        if handed is not None:
            return handed
        group = mod.__dict__.get("_native_group")
        if group is not None:
            outs = extension().quantized_matvec_many(
                x, [a for m in group for a in (m.weight, m.scales, m.biases)],
                mod.group_size, mod.bits, force_scalar=mod._native_scalar,
                int8_x=mod._native_int8)
            for member, out in zip(group[1:], outs[1:], strict=True):
                member.__dict__["_native_ready"] = (x, out)
            return outs[0]
        # the extension's own function: this runs ~100-200 times a decode step
        return mod._native_qmv(x, mod.weight, mod.scales, mod.biases, mod.group_size,
                               mod.bits, force_scalar=mod._native_scalar,
                               int8_x=mod._native_int8)
    f32 = getattr(mod, "_native_f32", None)
    if f32 is not None and x.dtype == mx.float32:
        return x @ f32.T
    if x.dtype == mx.float32:
        w = dequantize_f32(mod.weight, mod.scales, mod.biases, mod.group_size, mod.bits)
        return x @ w.T
    return mx.quantized_matmul(x, mod.weight, mod.scales, mod.biases, transpose=True,
                               group_size=mod.group_size, bits=mod.bits)


class NativeQuantizedLinear(nn.QuantizedLinear):
    def __call__(self, x: mx.array) -> mx.array:
        y = _matmul(self, x)
        if "bias" in self:
            y = y + self["bias"]
        return y


class NativeQuantizedEmbedding(nn.QuantizedEmbedding):
    def as_linear(self, x: mx.array) -> mx.array:
        return _matmul(self, x)


_SWAPS = {nn.QuantizedLinear: NativeQuantizedLinear,
          nn.QuantizedEmbedding: NativeQuantizedEmbedding}


def max_rows_from_env(int8: bool = False) -> int:
    """0 when the switch is off ("0"), else the row limit it asks for (when unset: every
    row count for batch invariance, or with BATCHCHAT_INVARIANT=0 the fastest limit for
    float32 or int8 activations)."""
    value = os.environ.get(ENABLE_ENV, "").strip()
    if value == "0":
        return 0
    if value.isdigit() and value != "1":
        return int(value)
    if invariant_from_env():
        return ALL_ROWS
    return INT8_MAX_ROWS if int8 else DEFAULT_MAX_ROWS


def keep_float32_from_env() -> bool:
    """Whether large batches get float32 copies of the weights (default no: measured no
    faster in the engine, docs/kernels.md, for 5x the memory)."""
    return os.environ.get(KEEP_F32_ENV, "").strip() not in ("", "0")


def int8_from_env() -> bool:
    """Whether the kernel rounds activations to int8 (llama.cpp's scheme, the CPU default
    since it measured 1.2-1.4x faster a decode step; "0" keeps float32 activations, whose
    greedy tokens equal MLX's own quantized path; docs/kernels.md)."""
    return os.environ.get(INT8_ENV, "").strip() != "0"


def install(model: nn.Module, max_rows: int = DEFAULT_MAX_ROWS,
            keep_float32: bool = False, int8: bool = False, packed: bool = False) -> int:
    """Swap the supported quantized modules; returns how many (0 when the kernel is unusable).

    keep_float32: also keep each weight dequantized to float32 (not a parameter: never saved)
    for calls above the row limit, which then cost a plain float32 matmul like today's CPU
    path instead of a dequantization per call; memory: the float32 model on top of the
    quantized one (bundled model: +540 MB to ~100 MB).
    int8: the kernel rounds each 32-block of the input to int8 and uses integer dot
    products (faster; each output within sum |w| * step / 2 of the exact one).
    packed (with int8): a packed copy of each weight (src/packed.h) takes every call, any
    row count: one arithmetic for a row alone or in any batch (engine/determinism.py), and
    faster than the other kernels and BLAS at every size measured (docs/determinism.md).
    Memory: one more copy of the quantized weights.
    """
    if not available():
        return 0
    count = 0
    for _, mod in model.named_modules():
        new_cls = _SWAPS.get(type(mod))
        if new_cls is None and type(mod) in _SWAPS.values():
            new_cls = type(mod)  # already installed: just update the limit
        if new_cls is not None and _supported(mod):
            mod.__class__ = new_cls
            rows = max(max_rows, LM_HEAD_MIN_ROWS) if new_cls is NativeQuantizedEmbedding \
                else max_rows
            object.__setattr__(mod, "_native_max_rows", rows)
            object.__setattr__(mod, "_native_int8", int8)
            object.__setattr__(mod, "_native_qmv", extension().quantized_matvec)
            object.__setattr__(mod, "_native_scalar", not simd())
            f32 = (dequantize_f32(mod.weight, mod.scales, mod.biases, mod.group_size, mod.bits)
                   if keep_float32 else None)
            if f32 is not None:
                mx.eval(f32)
            object.__setattr__(mod, "_native_f32", f32)
            pk = None
            if packed and int8 and mod.weight.shape[1] * 32 // mod.bits % 32 == 0:
                pk = extension().pack_quantized(mod.weight, mod.scales, mod.biases,
                                                mod.group_size, mod.bits)
            object.__setattr__(mod, "_native_packed", pk)
            object.__setattr__(mod, "_native_n", mod.weight.shape[0])
            count += 1
    _group_siblings(model)
    return count


def _group_siblings(model: nn.Module) -> None:
    """Mark each SIBLINGS set whose members are all on the kernel with one layout."""
    for _, parent in model.named_modules():
        for names in SIBLINGS:
            members = [parent.get(n) if isinstance(parent, dict) else None for n in names]
            if not all(type(m) is NativeQuantizedLinear for m in members):
                continue
            first = members[0]
            same = all(m.group_size == first.group_size and m.bits == first.bits
                       and m.weight.shape[1] == first.weight.shape[1]
                       and m.scales.dtype == first.scales.dtype
                       and m._native_max_rows == first._native_max_rows
                       and (m._native_packed is None) == (first._native_packed is None)
                       for m in members)
            for m in members:
                object.__setattr__(m, "_native_group", None)
                object.__setattr__(m, "_native_ready", None)
            if same:
                object.__setattr__(first, "_native_group", tuple(members))


def uninstall(model: nn.Module) -> None:
    back = {v: k for k, v in _SWAPS.items()}
    for _, mod in model.named_modules():
        if type(mod) in back:
            mod.__class__ = back[type(mod)]
            for name in ("_native_f32", "_native_group", "_native_ready", "_native_packed"):
                object.__setattr__(mod, name, None)
