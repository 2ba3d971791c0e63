"""Native CPU kernels for MLX (issue #19): quantized matrix-vector products, and attention
of a few queries over a KV cache (`cache_attention`).

`quantized_matvec(x, w, scales, biases, group_size, bits)` computes
``x @ mx.dequantize(w, scales, biases, group_size, bits).T`` (what ``mx.quantized_matmul``
with ``transpose=True`` computes) for MLX's affine layout, 4/8 bits, group 32/64, directly
on the packed weights: AVX2/FMA when the CPU has it (checked at run time), portable code
otherwise, split over a few reused threads.

`available()` says whether the engine may use it: the extension is built and loads, and
MLX's default device is the CPU (on Metal/CUDA MLX's own kernels are used). When it is not,
one warning says why, once per process. Whether the engine wants it at all, and the portable
kernels instead of AVX2 (`force_scalar`), are `CpuOptions` (engine/cpu_options.py), passed by
the callers: nothing here reads the environment. Build: ``python -m engine.native build``.
"""

from __future__ import annotations

import importlib
import logging
import math
import sys
from types import ModuleType
from typing import Any

import mlx.core as mx

from .build import LIB_DIR

log = logging.getLogger(__name__)

_ext: ModuleType | None = None
_reason: str | None = None  # why the extension is unavailable, None when it is usable
_checked = False
_warned = False
_simd = False  # set at load: the AVX2 kernels run (read once: a decode step makes ~800 calls)


def _load() -> None:
    global _ext, _reason, _checked, _simd
    if _checked:
        return
    _checked = True
    if not any(p.name.startswith("_qmv.") for p in LIB_DIR.glob("_qmv.*")):
        _reason = "not built (run: python -m engine.native build)"
        return
    if str(LIB_DIR) not in sys.path:
        sys.path.insert(0, str(LIB_DIR))
    try:
        _ext = importlib.import_module("_qmv")
    except ImportError as exc:  # stale build, other mlx or nanobind version
        _reason = f"failed to load ({exc}); rebuild with: python -m engine.native build"
        return
    _simd = bool(_ext.cpu_has_avx2_fma())


def reset() -> None:
    """Forget the load state (after a build, or in tests) so the next call loads again."""
    global _ext, _reason, _checked, _warned, _simd
    _ext, _reason, _checked, _warned, _simd = None, None, False, False, False
    sys.modules.pop("_qmv", None)


def _device_reason() -> str | None:
    if mx.default_device() != mx.cpu:
        return f"default device is {mx.default_device()} (MLX's own kernels are used there)"
    return None


def available() -> bool:
    """True when the kernels may be used now; else logs one warning (once) with the reason."""
    global _warned
    _load()
    reason = _reason or _device_reason()
    if reason is None:
        return True
    if not _warned:
        _warned = True
        log.warning("native CPU kernels not used: %s; using MLX's own ops", reason)
    return False


def unavailable_reason() -> str | None:
    """Why available() is False, or None."""
    _load()
    return _reason or _device_reason()


def simd() -> bool:
    """True when the CPU runs the AVX2/FMA kernels (False: the portable ones, slower but
    exact; a call's `force_scalar` asks for those anyway)."""
    _load()
    return _simd


def info() -> str:
    """One line for logs and `python -m engine.native info`."""
    _load()
    if _ext is None:
        return f"engine.native: unavailable: {_reason}"
    kernel = "avx2+fma" if simd() else "portable"
    return f"engine.native: loaded from {LIB_DIR}, kernel {kernel}, {_ext.threads()} threads"


def set_threads(n: int) -> None:
    """Threads for one kernel call, the caller's included (default: CPU count, at most 8)."""
    _load()
    if _ext is not None:
        _ext.set_threads(n)


def quantized_matvec(x: mx.array, w: mx.array, scales: mx.array, biases: mx.array,
                     group_size: int = 64, bits: int = 4, *, force_scalar: bool = False,
                     int8_x: bool = False, stream: Any = None) -> mx.array:
    """x @ dequantize(w, scales, biases).T for x of shape (..., K); runs on the CPU stream.

    int8_x: x is rounded to int8 per block of 32 (step max|x| / 127) and the products are
    integer dot products (llama.cpp's Q4_1 x Q8_1 scheme): faster, not exact; the error of
    each output is at most sum |scale * q| * step / 2 over its blocks (docs/kernels.md).

    Raises RuntimeError when the extension is not loaded (check `available()` first).
    """
    scalar = force_scalar or not simd()
    return _ext_or_raise().quantized_matvec(x, w, scales, biases, group_size, bits,
                                 force_scalar=scalar, int8_x=int8_x, stream=stream)


def quantized_matvec_many(x: mx.array, weights: list[tuple[mx.array, mx.array, mx.array]],
                          group_size: int = 64, bits: int = 4, *, force_scalar: bool = False,
                          int8_x: bool = False, stream: Any = None) -> list[mx.array]:
    """`quantized_matvec` of x with several (w, scales, biases) in one op (a layer's q/k/v or
    gate/up projections): x is prepared once and all their rows are one job for the threads."""
    scalar = force_scalar or not simd()
    flat = [a for triple in weights for a in triple]
    return _ext_or_raise().quantized_matvec_many(x, flat, group_size, bits, force_scalar=scalar,
                                                 int8_x=int8_x, stream=stream)


def pack_quantized(w: mx.array, scales: mx.array, biases: mx.array, group_size: int = 64,
                   bits: int = 4) -> list[mx.array]:
    """A quantized weight (mx.quantize's affine w, scales, biases) in the layout of
    `packed_matvec_many`: [weights, scales, biases], a copy (evaluates its inputs)."""
    return list(_ext_or_raise().pack_quantized(w, scales, biases, group_size, bits))


def packed_matvec_many(x: mx.array, packed: list[list[mx.array]], ns: list[int],
                       group_size: int = 64, bits: int = 4, *, force_scalar: bool = False,
                       form: int = 0, layouts: list[tuple[int, int, int]] | None = None,
                       stream: Any = None) -> list[mx.array]:
    """x @ W.T for each packed weight (N = ns[i] outputs), x rounded to int8 per 32-block
    once for all of them. The arithmetic of an output row depends only on its own x row
    and is the same on the AVX-512, AVX2 and portable paths (issue #25, src/packed.h).
    `form`: src/packed.h's Form of the weights (1: Q4_K's, group 32 and 4 bits; 2: Q6_K's,
    group 16 and 6 bits; as the loader packs them: loader/packed_form.py). `layouts`: each
    weight's own (group_size, bits, form) instead, where they differ: each output gets the
    bits a call of its own gives."""
    scalar = force_scalar or not simd()
    flat = [a for triple in packed for a in triple]
    each = [v for layout in layouts for v in layout] if layouts else []
    return _ext_or_raise().packed_matvec_many(x, flat, ns, group_size, bits,
                                              force_scalar=scalar, form=form, layouts=each,
                                              stream=stream)


def pack_experts(w: mx.array, scales: mx.array, biases: mx.array, group_size: int = 64,
                 bits: int = 4) -> list[mx.array]:
    """Stacked experts (E, N, ...: a QuantizedSwitchLinear's arrays) in the layout of
    `packed_experts_matvec`: each expert packed as `pack_quantized` packs one matrix, one
    after another (a copy; evaluates its inputs)."""
    return list(_ext_or_raise().pack_experts(w, scales, biases, group_size, bits))


def packed_experts_matvec(x: mx.array, indices: mx.array, packed: list[list[mx.array]],
                          ns: list[int], experts: int, group_size: int = 64, bits: int = 4, *,
                          force_scalar: bool = False, form: int = 0, out: int = 0,
                          slot_weights: mx.array | None = None,
                          stream: Any = None) -> list[mx.array]:
    """MoE experts grouped: for x (M, X, K) (X is 1 or k) and indices (M, k), output i
    (M, k, ns[i]) holds x[m, 0 or j] @ W_i[indices[m, j]].T. The (row, expert) pairs are
    sorted by expert and each expert's rows run as one packed int8 product; a pair's bits
    are those its row gets alone (src/packed.h), whatever rows share its expert. `form`:
    as packed_matvec_many's. `out` 1: two weights (gate, up) give one output, silu(gate) *
    up; 2: one weight gives (M, N), each row's k outputs summed in slot order weighted by
    `slot_weights` (M, k) (src/packed.h's ExpertsOut)."""
    scalar = force_scalar or not simd()
    flat = [a for triple in packed for a in triple]
    return _ext_or_raise().packed_experts_matvec(x, indices, flat, ns, experts, group_size,
                                                 bits, force_scalar=scalar, form=form,
                                                 out=out, slot_weights=slot_weights,
                                                 stream=stream)


def moe_route(logits: mx.array, k: int, normalise: bool, *,
              stream: Any = None) -> tuple[mx.array, mx.array]:
    """A MoE block's routing of float32 logits (..., E) in one op: softmax (max subtracted,
    the sum in index order), the k largest probabilities (largest first, the lower index
    on a tie) as (inds uint32, scores float32) (..., k), the scores divided by their sum
    when `normalise`. A row's outputs depend on its logits alone (src/moe_route.h)."""
    inds, scores = _ext_or_raise().moe_route(logits, k, normalise, stream=stream)
    return inds, scores


def dequantize_f32(w: mx.array, scales: mx.array, biases: mx.array, group_size: int = 64,
                   bits: int = 4, *, force_scalar: bool = False, stream: Any = None) -> mx.array:
    """scales * q + biases as float32 (N, K): ``mx.dequantize``, many times faster on the CPU.

    Raises RuntimeError when the extension is not loaded (check `available()` first).
    """
    scalar = force_scalar or not simd()
    return _ext_or_raise().dequantize_f32(w, scales, biases, group_size, bits, force_scalar=scalar,
                               stream=stream)


def cache_attention(queries: mx.array, keys: mx.array, values: mx.array, scale: float,
                    mask: mx.array | str | None = None, *, force_scalar: bool = False,
                    tiled_from: int = -1, softcap: float = 0.0, sinks: mx.array | None = None,
                    packing: Any = None, stream: Any = None) -> mx.array:
    """``mx.fast.scaled_dot_product_attention`` for float32 queries (B, Hq, L, D) over
    keys/values (B, Hkv, T, D), in one CPU op: grouped heads share a pass over K and V,
    strided cache views are read in place. `mask`: None, "causal", or an array (bool:
    true = attend; else added to the scores) broadcastable to (B, Hq, L, T).

    From `tiled_from` query positions on (-1: the built-in default, 0: never) a tiled kernel
    with an online softmax runs: memory stays a few tiles whatever the length, and under a
    causal mask the keys after a block's last position are skipped (prefill of long prompts).

    `softcap` > 0: each score capped to softcap * tanh(score / softcap) before the mask
    (Gemma 2's attention logit soft-capping); not with an additive mask. `sinks` (Hq,):
    each head's logit joins its softmax's denominator as a key without a value (gpt-oss).

    `packing` (engine/kv_quant.py KvPacking): keys and values are its packed uint8 rows,
    dequantized a tile at a time inside the tiled kernel (every query count). A turned
    form's rows are K H and V H: the queries are turned the same way and the output turned
    back (H symmetric, H @ H = I), each row on its own (mx.hadamard_transform).

    Raises RuntimeError when the extension is not loaded (check `available()` first).
    """
    ext = _ext_or_raise()
    kind, arr = _mask_kind(mask, queries)
    scalar = force_scalar or not simd()
    turned = packing is not None and packing.turned and queries.size > 0
    out = ext.cache_attention(mx.hadamard_transform(queries) if turned else queries, keys,
                              values, arr, scale, kind, force_scalar=scalar,
                              tiled_from=tiled_from, softcap=softcap,
                              sinks=_NO_WEIGHT if sinks is None else sinks,
                              kv_bits=0 if packing is None else packing.bits,
                              kv_group=0 if packing is None else packing.group, stream=stream)
    return mx.hadamard_transform(out) if turned else out


def cache_attention_rows(queries: mx.array, keys: list[mx.array], values: list[mx.array],
                         scale: float, mask: mx.array | str | None = None, *,
                         force_scalar: bool = False, tiled_from: int = -1,
                         softcap: float = 0.0, sinks: mx.array | None = None,
                         packing: Any = None, stream: Any = None) -> mx.array:
    """`cache_attention` with batch row b's keys and values in arrays of their own,
    `keys[b]` and `values[b]` (1, Hkv, T_b, D), read in place: rows need not share one
    buffer, nor one width (issue #47, one KV layout: a sequence's KV can stay where it was
    written). T is the mask's width, or the longest T_b without an array mask; a row's keys
    past its own T_b count as masked and are never read. The same bits as `cache_attention`
    over the rows stacked into one (B, Hkv, T, D) buffer."""
    ext = _ext_or_raise()
    kind, arr = _mask_kind(mask, queries)
    scalar = force_scalar or not simd()
    turned = packing is not None and packing.turned and queries.size > 0
    out = ext.cache_attention_rows(mx.hadamard_transform(queries) if turned else queries,
                                   keys, values, arr, scale, kind, force_scalar=scalar,
                                   tiled_from=tiled_from, softcap=softcap,
                                   sinks=_NO_WEIGHT if sinks is None else sinks,
                                   kv_bits=0 if packing is None else packing.bits,
                                   kv_group=0 if packing is None else packing.group,
                                   stream=stream)
    return mx.hadamard_transform(out) if turned else out


def _mask_kind(mask: mx.array | str | None, queries: mx.array) -> tuple[int, mx.array]:
    """The kernel's mask kind and array (queries stand in where there is no array)."""
    if mask is None:
        return 0, queries
    if isinstance(mask, str):
        if mask != "causal":
            raise ValueError(f"unknown mask {mask!r}")
        return 1, queries
    return (2 if mask.dtype == mx.bool_ else 3), mask


def extension_if_built() -> ModuleType | None:
    """The extension when it is built and loads, whatever the device and the switches: for
    work that is the same on every backend (the loader's GGML decoding)."""
    _load()
    return _ext


def built_function(name: str) -> Any:
    """The extension's function `name` when the extension is built (any backend: the
    loader's decoding runs on the CPU whatever runs the model), else None."""
    ext = extension_if_built()
    return getattr(ext, name, None) if ext is not None else None


def extension() -> ModuleType:
    """The loaded extension module itself, for callers on a hot path (engine/native/layers.py);
    raises RuntimeError when it is not loaded."""
    return _ext_or_raise()


def _ext_or_raise() -> ModuleType:
    _load()
    if _ext is None:
        raise RuntimeError(f"engine.native is unavailable: {_reason}")
    return _ext


def rope_inv_freq(dims: int, base: float | None, freqs: mx.array | None = None) -> mx.array:
    """The dims / 2 inverse frequencies mx.fast.rope uses: base ** (-i / (dims / 2)) computed
    as MLX computes them, or 1 / freqs."""
    if freqs is not None:
        return mx.reciprocal(freqs.astype(mx.float32))
    half = dims // 2
    return mx.exp(mx.arange(0, -half, -1, dtype=mx.float32) * (math.log(base) / half))


def rope(x: mx.array, dims: int, *, traditional: bool, scale: float, offset: int | mx.array,
         inv_freq: mx.array, stream: Any = None) -> mx.array:
    """``mx.fast.rope`` for float32 x (B, *, T, D) in one CPU op; `inv_freq` from
    `rope_inv_freq` (computed once per module). Raises RuntimeError when not loaded."""
    off = offset if isinstance(offset, mx.array) else mx.array(offset, dtype=mx.int32)
    return _ext_or_raise().rope(x, dims, traditional, scale, off, inv_freq, stream=stream)


def rms_norm(x: mx.array, weight: mx.array | None, eps: float, *, force_scalar: bool = False,
             stream: Any = None) -> mx.array:
    """``mx.fast.rms_norm`` for float32 x in one CPU op."""
    w = weight if weight is not None else _NO_WEIGHT
    scalar = force_scalar or not simd()
    return _ext_or_raise().rms_norm(x, w, eps, force_scalar=scalar, stream=stream)


def silu_mul(gate: mx.array, up: mx.array, *, force_scalar: bool = False,
             stream: Any = None) -> mx.array:
    """silu(gate) * up (mlx-lm's swiglu) for float32 arrays of one shape, in one CPU op."""
    scalar = force_scalar or not simd()
    return _ext_or_raise().silu_mul(gate, up, force_scalar=scalar, stream=stream)


def softcap(x: mx.array, cap: float, *, force_scalar: bool = False,
            stream: Any = None) -> mx.array:
    """cap * tanh(x / cap) (Gemma 2 / 4's final logit soft-capping) for a float32 array, in
    one CPU op; an element's bits do not depend on where it sits (src/softcap.h)."""
    scalar = force_scalar or not simd()
    return _ext_or_raise().softcap(x, cap, force_scalar=scalar, stream=stream)


def float_matmul(x: mx.array, w: mx.array, *, force_scalar: bool = False,
                 stream: Any = None) -> mx.array:
    """x @ w.T for float32 x (..., K) and w (N, K) in one CPU op, each output summed in one
    fixed order (src/float_matmul.h): a row's bits do not depend on the other rows, and the
    portable and AVX2 paths agree (BLAS picks another kernel for one row than for many)."""
    scalar = force_scalar or not simd()
    return _ext_or_raise().float_matmul(x, w, force_scalar=scalar, stream=stream)


def gelu_tanh_mul(gate: mx.array, up: mx.array, *, force_scalar: bool = False,
                  stream: Any = None) -> mx.array:
    """nn.gelu_approx(gate) * up (Gemma's MLP) for float32 arrays of one shape, in one CPU
    op; within a few float32 ulps of MLX's composed ops (its tanh against an exp here), and
    the same bits on the portable and the AVX2 path."""
    scalar = force_scalar or not simd()
    return _ext_or_raise().gelu_tanh_mul(gate, up, force_scalar=scalar, stream=stream)


def sample_tokens(logits: mx.array, u: mx.array, params: mx.array, *,
                  penalty_at: mx.array | None = None, penalty: mx.array | None = None,
                  pending: mx.array | None = None, stream: Any = None) -> mx.array:
    """One token per row of float32 `logits` (B, V), in one CPU op: the tokens mlx-lm's
    `make_sampler(temp, top_p, min_p, top_k)` keeps (top-p, then min-p, then top-k, on the
    untempered distribution), then the one where their cumulative probability at the row's
    temperature, in token-id order, first exceeds u (B,) times their total. `params` (B, 4):
    temperature (> 0), top_p (0 or 1: off), min_p, top_k (0: off). Returns (B,) uint32.
    `penalty_at` (B, W) int32 and `penalty` (B,) float32: mlx-lm's repetition penalty on
    those tokens first (engine.sampling.penalize_rows' values; a column < 0 is the row's
    `pending` token, (B,) int32 or uint32), in the same op, the logits left as they are."""
    return _ext_or_raise().sample_tokens(logits, u, params, penalty_at=penalty_at,
                                         penalty=penalty, pending=pending, stream=stream)


def kv_write(buffer: mx.array, update: mx.array, lengths: mx.array, *,
             stream: Any = None) -> mx.array:
    """`buffer` (B, H, T, D) with `update` (n, H, S, D) written at columns lengths[b] ..
    lengths[b] + S of rows b < n, in one CPU op (in place when nothing else holds the
    buffer). The caller keeps lengths[b] + S <= T (positions out of range are skipped)."""
    return _ext_or_raise().kv_write(buffer, update, lengths, stream=stream)


def kv_write_columns(arena: mx.array, update: mx.array, columns: mx.array, *,
                     stream: Any = None) -> mx.array:
    """`arena` (1, H, C, D) with `update` (n, H, S, D): row b written at the arena's
    columns columns[b] .. columns[b] + S (each batch row owns a column range of one
    per-layer arena, engine/kv_arena.py), in one CPU op, in place when nothing else holds
    the arena. The caller keeps columns[b] + S <= C (positions out of range are skipped)."""
    return _ext_or_raise().kv_write_columns(arena, update, columns, stream=stream)


def kv_pack(x: mx.array, bits: int, group: int, *, turn: bool = False,
            stream: Any = None) -> mx.array:
    """Quantized KV rows (engine/kv_quant.py) in one CPU op: float32 `x` (..., D) ->
    (..., width) uint8, each row mx.quantize(x, group, bits)'s uint32 words, float32 scales
    and float32 biases laid end to end, bit for bit (src/kv_pack_op.cpp). `turn`: of
    mx.hadamard_transform(x) instead (D a power of two), bit for bit too."""
    return _ext_or_raise().kv_pack(x, bits, group, turn=turn, stream=stream)


_NO_WEIGHT = mx.zeros((0,), dtype=mx.float32)
