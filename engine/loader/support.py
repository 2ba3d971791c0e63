"""What this backend's loader can load, said without loading MLX (for the model library).

The rules mirror engine/loader/gguf_arch.py (the GGUF architectures it builds),
gguf_tokenizer.py (the vocabularies it builds), ggml_types.py (how each tensor type is held)
and engine/loader/mlx_dir.py (mlx-lm's own model modules); tests/engine/test_loader_support.py
holds them to those modules. Each check returns "" when the model loads, else the reason it
does not. ``gguf_memory`` says what a GGUF will take once loaded, from its header alone.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..kv_formula import formula, host_available_bytes
from ..units import format_bytes

# gguf_arch.ARCHS
GGUF_ARCHITECTURES = frozenset({"llama", "qwen2", "qwen2vl", "qwen3", "qwen3vl", "qwen3moe",
                                "gemma2", "gemma3", "gemma4", "phi3", "granite", "olmo2",
                                "smollm3", "gpt-oss", "mistral3", "qwen35", "qwen35moe",
                                "lfm2"})
# gguf_tokenizer.SUPPORTED_MODELS (tokenizer.ggml.model)
GGUF_TOKENIZERS = frozenset({"gpt2", "llama", "gemma4", "t5", "bert"})
# llama.cpp's LLAMA_FTYPE values (general.file_type): the quantization a file names
GGUF_FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
                   10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S",
                   15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS",
                   20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S",
                   25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M",
                   30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 38: "MXFP4"}
GGML_TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
                   9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K",
                   15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S",
                   20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16",
                   26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 30: "BF16", 34: "TQ1_0",
                   35: "TQ2_0", 39: "MXFP4", 40: "NVFP4"}


@dataclass(frozen=True)
class HeldType:
    """How the engine holds a quantized GGML type (ggml_types.py): q in `bits`, a scale and a
    bias a group of `group` in `scale_bytes` each (fp16 where that is exact)."""

    bits: int
    group: int
    scale_bytes: int

    @property
    def bits_per_weight(self) -> float:
        return self.bits + 2 * self.scale_bytes * 8 / self.group


# Kept quantized (ggml_types._CONVERTERS): every tensor of these loads as an affine form.
GGUF_KEPT_TYPES = {2: HeldType(4, 32, 2), 3: HeldType(4, 32, 2), 12: HeldType(4, 32, 4),
                   6: HeldType(8, 32, 2), 7: HeldType(8, 32, 2), 13: HeldType(8, 32, 4),
                   8: HeldType(8, 32, 2), 11: HeldType(8, 32, 2), 20: HeldType(8, 32, 2),
                   23: HeldType(8, 32, 4), 39: HeldType(8, 32, 2), 14: HeldType(8, 16, 4),
                   10: HeldType(4, 16, 4)}
# Bits a weight in the native kernel's own forms for K-quants (packed.h: Q4_K / Q5_K 4- / 5-bit
# values, the file's 6-bit sub-scales and minimums and fp16 d and dmin; Q6_K 6-bit values, int8
# sub-scale a 16, fp16 d a 256), for Q4_0 / Q8_0 / Q5_0 (the file's fp16 d a 32, no bias)
# and Q5_1 / Q4_1 (its fp16 d and m a 32): the file's; the other kept types: bits + float32
# scale and bias.
PACKED_BITS = {12: 4.5, 13: 5.5, 14: 6.5625, 2: 4.5, 8: 8.5, 6: 5.5, 7: 6.0, 3: 5.0}
GGUF_FLOAT_TYPES = frozenset({0, 1, 30})  # F32, F16, BF16
# gguf-py dequantizes these and nothing runs them quantized here: float32, said at load.
GGUF_FLOAT32_TYPES = frozenset({16, 17, 18, 19, 21, 22, 29, 34, 35, 40})
GGUF_ROPE_SCALING = frozenset({None, "none", "linear", "yarn"})


def ggml_type_name(kind: int) -> str:
    """"Q4_K" for a GGML tensor type number."""
    return GGML_TYPE_NAMES.get(kind, f"type {kind}")


def gguf_unsupported(architecture: str | None, tensor_types: Iterable[int],
                     rope_scaling: str | None = None) -> str:
    """Why a GGUF with this header does not load here ("" when it does)."""
    if architecture not in GGUF_ARCHITECTURES:
        return (f"GGUF architecture {architecture!r} is not supported here (supported: "
                f"{', '.join(sorted(GGUF_ARCHITECTURES))})")
    loadable = GGUF_FLOAT_TYPES | GGUF_KEPT_TYPES.keys() | GGUF_FLOAT32_TYPES
    odd = sorted({t for t in tensor_types if t not in loadable})
    if odd:
        names = ", ".join(ggml_type_name(t) for t in odd)
        return f"{names} tensors are not supported (no dequantizer for them)"
    if rope_scaling not in GGUF_ROPE_SCALING:
        return f"RoPE scaling {rope_scaling!r} is not supported"
    return ""


def gguf_refusal(architecture: str | None, tensor_types: Iterable[int],
                 tensor_names: Collection[str], arch_value: Callable[[str], Any],
                 tokenizer_model: Any, *, data_end: int = 0, size: int = 0) -> str:
    """Why a GGUF with this header does not load here ("" when it does): the one list of
    reasons, given by the model library (app/models/inspect.py) and by the loader at load
    time (gguf.py), so a refused file says the same in both places."""
    rope = arch_value("rope.scaling.type")
    reason = gguf_unsupported(architecture, tensor_types, rope if isinstance(rope, str) else None)
    if not reason and "token_embd.weight" not in tensor_names:
        reason = "no model weights in the file (a vocabulary-only GGUF?)"
    if not reason:  # what gguf_arch.hf_config needs
        lacks = [k for k in ("embedding_length", "block_count", "attention.head_count")
                 if arch_value(k) is None]
        if lacks:
            reason = f"GGUF metadata lacks {architecture}.{lacks[0]}"
    if not reason:
        reason = gguf_tokenizer_unsupported(tokenizer_model if isinstance(tokenizer_model, str)
                                            else None)
    if not reason and data_end > size:
        reason = f"the file is truncated ({size:,} of {data_end:,} bytes)"
    return reason


def gguf_tokenizer_unsupported(model: str | None) -> str:
    """Why a GGUF's vocabulary (tokenizer.ggml.model) cannot be built here ("" when it can)."""
    if model is None:
        return "GGUF has no tokenizer (tokenizer.ggml.model missing)"
    if model not in GGUF_TOKENIZERS:
        return (f"GGUF tokenizer model {model!r} is not supported (supported: "
                f"{', '.join(sorted(GGUF_TOKENIZERS))})")
    return ""


@dataclass(frozen=True)
class MemoryNeed:
    """What a model takes once loaded: weights as held (floats; quantized ones where the
    engine keeps MLX's affine arrays), the quantized weights in the native kernel's packed
    layout (on the CPU: the loader decodes them straight into it and keeps no affine copy,
    engine/loader/packed_form.py), the default KV budget, and a hybrid model's recurrent
    state (a fixed size a sequence, whatever its length: Qwen 3.5's Gated DeltaNet)."""

    weights: int
    packed: int
    kv_budget: int
    float32_types: tuple[str, ...] = ()  # types that run as float32 (no quantized path)
    state: int = 0  # the recurrent state of max_concurrent sequences

    @property
    def total(self) -> int:
        return self.weights + self.packed + self.kv_budget + self.state

    def describe(self) -> str:
        parts = [f"weights {format_bytes(self.weights)}"]
        if self.packed:
            parts.append(f"packed quantized weights {format_bytes(self.packed)}")
        parts.append(f"KV budget {format_bytes(self.kv_budget)}")
        if self.state:
            parts.append(f"recurrent state {format_bytes(self.state)}")
        text = f"needs ~{format_bytes(self.total)} ({', '.join(parts)})"
        if self.float32_types:
            text += f"; {', '.join(self.float32_types)} run as float32"
        return text


def gguf_memory(weights_by_type: Mapping[int, int], *, layers: int, kv_heads: int,
                head_dim: int, context: int, max_concurrent: int = 16,
                packed_copy: bool = True, state_per_sequence: int = 0) -> MemoryNeed:
    """What a GGUF takes on the CPU once loaded, from its header: `weights_by_type` (GGML type
    → weights), the KV's shape and the engine's default budget (engine/kv_formula.py), and
    `state_per_sequence` bytes of recurrent state for each of `max_concurrent` sequences."""
    weights = packed = 0.0
    floated = []
    for kind, n in weights_by_type.items():
        held = GGUF_KEPT_TYPES.get(kind)
        if held is None:
            weights += 4 * n  # float32 on the CPU
            if kind not in GGUF_FLOAT_TYPES:
                floated.append(ggml_type_name(kind))
            continue
        if packed_copy:  # held once, packed: q as is, float32 scales and biases (stacked
            # experts too where the loader packs them; else MLX's arrays: about the same size),
            # Q4_K, Q5_K, Q6_K, Q4_0, Q8_0 in forms of their own (engine/native/src/packed.h)
            packed += n * PACKED_BITS.get(kind, held.bits + 64 / held.group) / 8
        else:
            weights += n * held.bits_per_weight / 8
    per_token = 2 * layers * kv_heads * head_dim * 4  # keys and values, float32
    state = state_per_sequence * max_concurrent
    kv, _ = formula(per_token, context, max_concurrent,
                    max(0, host_available_bytes() - int(weights + packed) - state))
    return MemoryNeed(int(weights), int(packed), kv, tuple(sorted(floated)), state)


@cache
def _mlx_lm_dir() -> Path | None:
    spec = importlib.util.find_spec("mlx_lm")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def _model_remapping() -> dict[str, str]:
    """mlx_lm.utils.MODEL_REMAPPING, read from its source (importing it loads MLX)."""
    root = _mlx_lm_dir()
    try:
        tree = ast.parse((root / "utils.py").read_text(encoding="utf-8")) if root else None
    except (OSError, SyntaxError):
        return {}
    for node in tree.body if tree else ():
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "MODEL_REMAPPING" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return {}
            return value if isinstance(value, dict) else {}
    return {}


def mlx_lm_unsupported(model_type: str | None) -> str:
    """Why mlx-lm cannot build a model of this config.json model_type ("" when it can)."""
    if not model_type:
        return "config.json names no model_type"
    root = _mlx_lm_dir()
    if root is None:
        return "mlx-lm is not installed"
    module = _model_remapping().get(model_type, model_type)
    if not (root / "models" / f"{module}.py").is_file():
        return f"mlx-lm has no model for model_type {model_type!r}"
    return ""
