"""A GGUF file's tensors as the arrays of an mlx-lm model, kept quantized where they are.

Each tensor goes to the mlx-lm parameter gguf-py's name map points it to (gguf_arch.py),
with what the converter did undone (q/k rows put back in order, Gemma's "+ 1" on norms
taken off). A quantized tensor becomes MLX's affine triple (``weight`` uint32, ``scales``,
``biases``) through ggml_types' exact form, or float32 where the weights are not kept
quantized; a linear's scales and biases are float16 where every one of them is exactly an
fp16 number (Q4_0/Q4_1/Q8_0: what MLX's own GGUF reader gave), else float32, and an
embedding's are float32 (its lookup returns their dtype).

Where each form runs:
- groups of 32, 4 or 8 bits: nn.QuantizedLinear / QuantizedEmbedding / QuantizedSwitchLinear
  on every backend (MLX's kernels, the engine's packed kernel on the CPU);
- groups of 16 (Q6_K, Q2_K): ggml_modules' Group16 layers on the CPU (the packed kernel
  takes them); on Metal and CUDA requantized to MLX's 8-bit groups of 32 from the exact
  weights, the closest form MLX runs there (not bit-exact: said in the load notes);
- a type without an affine form (IQ1-IQ3, TQ, NVFP4): float32, named in the load notes
  with what it costs.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import mlx.core as mx
import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from .errors import ModelLoadError
from .ggml_modules import dequantize_groups
from .ggml_types import (
    FLOAT_TYPES,
    AffineTensor,
    bits_per_weight,
    held_bits_per_weight,
    to_affine,
    to_float32,
    type_form,
)
from .gguf_file import GgufFile, GgufTensor
from .packed_form import AFFINE, PANEL, SCALE_ONLY_BIAS, Prepacked, affine_views


@dataclass(frozen=True)
class Quantized:
    """A module's quantized form: its group size and storage bits."""

    group: int
    bits: int


@dataclass
class Converted:
    weights: dict[str, mx.array] = field(default_factory=dict)
    modules: dict[str, Quantized] = field(default_factory=dict)  # module path → its form
    notes: list[str] = field(default_factory=list)  # what a user should know, once each
    # module path → its weight decoded straight into the native kernel's layout (the
    # module's arrays are lazy views of it: packed_form.py)
    prepacked: dict[str, Prepacked] = field(default_factory=dict)


@dataclass(frozen=True)
class Undo:
    """What llama.cpp's converter did to a tensor, to undo."""

    row_order: np.ndarray | None = None  # q/k rows back to split-halves RoPE order
    subtract: float = 0.0  # Gemma's norm weights were stored plus one


def _fp16_exact(scales_mx: mx.array, biases_mx: mx.array) -> tuple[np.ndarray, np.ndarray] | None:
    """Both as fp16 where every scale and bias is exactly an fp16 number, else None."""
    mx.eval(scales_mx, biases_mx)
    scales, biases = np.asarray(memoryview(scales_mx)), np.asarray(memoryview(biases_mx))
    with np.errstate(over="ignore"):
        s16, b16 = scales.astype(np.float16), biases.astype(np.float16)
    if np.array_equal(s16.astype(np.float32), scales) and \
            np.array_equal(b16.astype(np.float32), biases):
        return s16, b16
    return None


def _packed_fp16_exact(pk: Prepacked) -> bool:
    """Whether every scale and bias of a packed triple is exactly an fp16 number (a
    scale-only form's d is fp16; its bias d * -8 or -128 is unless it overflows)."""
    factor = SCALE_ONLY_BIAS.get(pk.form)
    if factor is None:
        return _fp16_exact(pk.scales, pk.biases) is not None
    top = mx.max(mx.abs(pk.scales.astype(mx.float32))).item() if pk.scales.size else 0.0
    return top * abs(factor) <= float(np.finfo(np.float16).max)


def _narrow(scales_mx: mx.array, biases_mx: mx.array) -> tuple[mx.array, mx.array]:
    """fp16 where every scale and bias is exactly one, else float32."""
    exact = _fp16_exact(scales_mx, biases_mx)
    if exact is not None:
        return mx.array(exact[0]), mx.array(exact[1])
    return scales_mx, biases_mx


def _float(t: GgufTensor, undo: Undo, widen: bool) -> mx.array:
    if t.kind in FLOAT_TYPES and t.kind != GGMLQuantizationType.BF16 and not widen \
            and undo.row_order is None and not undo.subtract:
        return mx.array(np.asarray(t.data))  # F16/F32 as they are
    w = to_float32(t.data, t.kind)
    if undo.row_order is not None:
        w = w[undo.row_order]
    if undo.subtract:
        w = w - np.float32(undo.subtract)
    if t.kind == GGMLQuantizationType.BF16 and not widen:
        return mx.array(w).astype(mx.bfloat16)
    if t.kind == GGMLQuantizationType.F16 and not widen:
        return mx.array(w.astype(np.float16))
    return mx.array(w)


# Types whose scale is a product (d × a sub-scale): never exactly fp16, so no check.
_PRODUCT_SCALES = frozenset({GGMLQuantizationType.Q4_K, GGMLQuantizationType.Q5_K,
                             GGMLQuantizationType.Q6_K, GGMLQuantizationType.Q2_K,
                             GGMLQuantizationType.IQ4_XS})


@dataclass(frozen=True)
class MxAffine:
    """A tensor's affine triple as MLX arrays (AffineTensor's layout)."""

    packed: mx.array
    scales: mx.array
    biases: mx.array
    group: int
    bits: int

    def dequantize(self) -> mx.array:
        return dequantize_groups(self.packed, self.scales, self.biases, self.group, self.bits)


def _decode(t: GgufTensor) -> MxAffine | AffineTensor:
    """One quantized tensor's affine form (a worker's job): where the native decoder is
    built it writes into arrays MLX owns (no numpy copy), else numpy's AffineTensor. No MLX
    op runs here: MLX's streams belong to the thread that made them."""
    decode = _native_arrays()
    form = type_form(t.kind)
    if decode is not None and form is not None:
        block, size = GGML_QUANT_SIZES[t.kind]
        k = t.data.shape[-1] // size * block
        if k % form.group == 0 and t.data.flags.c_contiguous:
            w, s, b = decode(int(t.kind), t.data.reshape(-1), list(t.data.shape[:-1]), k)
            return MxAffine(w, s, b, form.group, form.bits)
    return to_affine(t.data, t.kind)


def _decode_packed(jobs: list[tuple[GgufTensor, Undo]]) -> list[Prepacked]:
    """Linears' weights straight into the native kernel's packed layout, rows in the
    model's order: one native call for all of them, without the GIL throughout (a worker's
    job, while the loader's thread builds the tokenizer)."""
    def job(t: GgufTensor, u: Undo) -> tuple:
        block, size = GGML_QUANT_SIZES[t.kind]
        order = [] if u.row_order is None else [int(i) for i in u.row_order]
        # stacked experts (E, N, ...) as E * N rows: each expert's panels whole (packable)
        return (int(t.kind), t.data.reshape(-1), int(np.prod(t.data.shape[:-1])),
                t.data.shape[-1] // size * block, order)

    whole = [i for i, (t, _) in enumerate(jobs) if t.data.flags.c_contiguous]
    out: list[Prepacked | None] = [None] * len(jobs)
    for i, triple in zip(whole, _native_packed_many()([job(*jobs[i]) for i in whole]),
                         strict=True):
        out[i] = Prepacked(*triple)
    for i, (t, u) in enumerate(jobs):
        if out[i] is None:
            # a view's rows (Gemma 4's fused gate/up experts' halves): its own call on a
            # contiguous copy of its bytes, one tensor's at a time, not all at once
            (triple,) = _native_packed_many()([job(t, u)])
            out[i] = Prepacked(*triple)
    return out  # type: ignore[return-value]


def packable(t: GgufTensor) -> bool:
    """Whether this tensor can be decoded straight into the packed layout (a 2-D weight of
    a type with an affine form, whole 32-blocks a row, its bytes contiguous; or stacked
    experts (E, N, ...) whose N is whole 16-row panels, so that packing the E * N rows as
    one matrix packs each expert as one: engine/native/switch_layers.py's layout)."""
    form = type_form(t.kind)
    # stacked experts may be views (Gemma 4's fused gate/up halves: _decode_packed copies
    # each alone)
    stacked = t.data.ndim == 3 and t.data.shape[-2] % PANEL == 0
    if form is None or t.kind in FLOAT_TYPES or not (t.data.ndim == 2 or stacked) or \
            not (stacked or t.data.flags.c_contiguous) or _native_packed_many() is None:
        return False
    block, size = GGML_QUANT_SIZES[t.kind]
    k = t.data.shape[-1] // size * block
    return k % 32 == 0 and k % form.group == 0


def _in_order(a: MxAffine | AffineTensor, u: Undo) -> MxAffine:
    """The decoded tensor as MLX arrays, its rows in the model's order (the caller's thread)."""
    if isinstance(a, AffineTensor):
        if u.row_order is not None:
            a = a.rows(u.row_order)
        return MxAffine(mx.array(a.packed), mx.array(a.scales), mx.array(a.biases), a.group,
                        a.bits)
    if u.row_order is None:
        return a
    order = mx.array(u.row_order)
    w, s, b = (mx.take(x, order, axis=-2) for x in (a.packed, a.scales, a.biases))
    return MxAffine(w, s, b, a.group, a.bits)


def _native_arrays():
    """engine.native's ggml_to_affine_arrays, or None where the extension is not built."""
    from .. import native

    return native.built_function("ggml_to_affine_arrays")


def _native_packed_many():
    """engine.native's ggml_to_packed_many, or None where the extension is not built."""
    from .. import native

    return native.built_function("ggml_to_packed_many")


def convert(f: GgufFile, names: dict[str, str], undo: dict[str, Undo], *,
            keep_quantized: bool, widen: bool, on_cpu: bool,
            pack: frozenset[str] = frozenset(),
            meanwhile: Callable[[], None] | None = None) -> Converted:
    """The model's arrays (mlx-lm names) from the file's tensors (``names``: mlx → GGUF).
    The numpy conversion of the quantized tensors runs on a thread per core (numpy lets go
    of the GIL): a 1.5B Q4_K_M's ~1.5e9 weights took twice as long on one. The modules in
    ``pack`` (linears the engine will run on its packed kernel, on the CPU) are decoded
    straight into that kernel's layout, their arrays lazy views of it (packed_form.py).
    ``meanwhile`` runs on the calling thread while the tensors are decoded on others."""
    out = Converted()
    held: dict[GGMLQuantizationType, int] = {}  # the widest scale a type got, bytes
    floated: Counter[GGMLQuantizationType] = Counter()  # weights a type
    plan = []
    for name, gguf_name in names.items():
        t = f.tensors[gguf_name]
        leaf = name.rpartition(".")[2]
        quantized = (t.kind not in FLOAT_TYPES and leaf == "weight"
                     and type_form(t.kind) is not None and keep_quantized)
        plan.append((name, gguf_name, t, undo.get(gguf_name, Undo()), quantized))
    packs = {name for name, _, t, u, q in plan
             if q and on_cpu and name.rpartition(".")[0] in pack and not u.subtract
             and packable(t)}
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        packed_job = pool.submit(_decode_packed, [(t, u) for name, _, t, u, _ in plan
                                                  if name in packs]) if packs else None
        futures = [pool.submit(_decode, t) if q and name not in packs else None
                   for name, _, t, _, q in plan]
        if meanwhile is not None:
            meanwhile()
        try:
            packed = iter(packed_job.result() if packed_job is not None else [])
        except ValueError as e:  # the checks of every tensor ran before any was decoded
            raise ModelLoadError(f"{f.path}: {e}") from e
        for (name, gguf_name, t, u, quantized), future in zip(plan, futures, strict=True):
            module = name.rpartition(".")[0]
            if name in packs:
                pk = next(packed)
                form = type_form(t.kind)
                assert form is not None
                narrow = (not gguf_name.startswith("token_embd.")
                          and t.kind not in _PRODUCT_SCALES
                          and _packed_fp16_exact(pk))
                dtype = mx.float16 if narrow else mx.float32
                rows = int(np.prod(t.shape[:-1]))  # stacked experts: E * N rows, then (E, N)
                w, s, b = (v.reshape(*t.shape[:-1], v.shape[-1])
                           for v in affine_views(pk, rows, form.bits, dtype))
                if pk.form == AFFINE:  # Q4_K / Q6_K: their own forms, near the file's width
                    held[t.kind] = max(held.get(t.kind, 0), 2 if narrow else 4)
                out.weights[name] = w
                out.weights[f"{module}.scales"], out.weights[f"{module}.biases"] = s, b
                out.modules[module] = Quantized(form.group, form.bits)
                out.prepacked[module] = pk
                continue
            if not quantized:
                if t.kind not in FLOAT_TYPES:
                    floated[t.kind] += int(np.prod(t.shape))
                out.weights[name] = _float(t, u, widen)
                continue
            try:
                a = _in_order(future.result(), u)
            except ValueError as e:
                raise ModelLoadError(f"{f.path}: tensor {gguf_name!r} ({t.kind.name}): "
                                     f"{e}") from e
            if a.group == 16 and not on_cpu:
                # MLX's kernels take groups of 32 and up: the closest is 8 bits over 32
                q, s, b = mx.quantize(a.dequantize(), group_size=32, bits=8)
                out.weights[name], out.weights[f"{module}.scales"] = q, s
                out.weights[f"{module}.biases"] = b
                out.modules[module] = Quantized(32, 8)
                held[t.kind] = 2
                continue
            if gguf_name.startswith("token_embd.") or t.kind in _PRODUCT_SCALES:
                # an embedding's lookup returns the scales' dtype: float32, as llama.cpp's
                # lookup does (fp16 would round d * q, and hand an architecture without an
                # input norm fp16 states)
                scales, biases = a.scales, a.biases
            else:
                scales, biases = _narrow(a.scales, a.biases)
            if not on_cpu:
                scales, biases = scales.astype(mx.float16), biases.astype(mx.float16)
            held[t.kind] = max(held.get(t.kind, 0), scales.itemsize)
            out.weights[name] = a.packed
            out.weights[f"{module}.scales"], out.weights[f"{module}.biases"] = scales, biases
            out.modules[module] = Quantized(a.group, a.bits)
    out.notes = _notes(held, floated, keep_quantized, on_cpu)
    return out


def _notes(held: dict[GGMLQuantizationType, int], floated: Counter[GGMLQuantizationType],
           keep_quantized: bool, on_cpu: bool) -> list[str]:
    notes = []
    for kind in sorted(held, key=lambda k: k.name):
        form = type_form(kind)
        assert form is not None
        file_bits, bits = bits_per_weight(kind), held_bits_per_weight(kind, held[kind])
        scale = "float32" if held[kind] == 4 else "float16"
        if form.group == 16 and not on_cpu:
            notes.append(f"{kind.name} tensors run as MLX's 8-bit groups of 32 on this GPU "
                         "(requantized from the exact weights; not bit-exact)")
        elif bits > file_bits + 2.5:
            notes.append(f"{kind.name} tensors are held as {form.bits}-bit groups of "
                         f"{form.group} with {scale} scales: {bits:.1f} bits a weight against "
                         f"{file_bits:.1f} in the file (no exact narrower form)")
    for kind in sorted(floated, key=lambda k: k.name):
        mib = floated[kind] * 4 / 2**20
        why = ("the weights are not kept quantized here" if not keep_quantized
               else "no quantized path for this type")
        notes.append(f"{kind.name} tensors run as float32 ({why}): {mib:,.0f} MiB, "
                     f"{32 / bits_per_weight(kind):.1f}x their size in the file")
    return notes

