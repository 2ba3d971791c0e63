"""What this backend's loader can load, said without loading MLX (for the model library).

The rules mirror engine/loader/gguf.py (llama-architecture GGUFs whose tensors MLX's GGUF
reader handles) and engine/loader/mlx_dir.py (mlx-lm's own model modules). Each check
returns "" when the model loads, else the reason it does not.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterable
from functools import cache
from pathlib import Path

# gguf.py: only llama-architecture GGUFs build a model.
GGUF_ARCHITECTURES = frozenset({"llama"})
# GGML tensor types mx.load reads from GGUF: F32, F16, Q4_0, Q4_1, Q8_0, BF16.
GGUF_TENSOR_TYPES = frozenset({0, 1, 2, 3, 8, 30})
GGML_TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
                   9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K",
                   15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S",
                   20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16",
                   26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 30: "BF16"}
GGUF_ROPE_SCALING = frozenset({None, "none", "linear"})


def ggml_type_name(kind: int) -> str:
    """"Q4_K" for a GGML tensor type number."""
    return GGML_TYPE_NAMES.get(kind, f"type {kind}")


def gguf_unsupported(architecture: str | None, tensor_types: Iterable[int],
                     rope_scaling: str | None = None) -> str:
    """Why a GGUF with this header does not load here ("" when it does)."""
    if architecture not in GGUF_ARCHITECTURES:
        return (f"GGUF architecture {architecture!r} is not supported (only llama-architecture "
                "GGUFs load here)")
    odd = sorted({t for t in tensor_types if t not in GGUF_TENSOR_TYPES})
    if odd:
        names = ", ".join(ggml_type_name(t) for t in odd)
        return (f"{names} tensors are not supported (MLX reads F32/F16/BF16/Q4_0/Q4_1/Q8_0 "
                "GGUF tensors only)")
    if rope_scaling not in GGUF_ROPE_SCALING:
        return f"RoPE scaling {rope_scaling!r} is not supported"
    return ""


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
