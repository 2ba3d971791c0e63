"""Load an mlx-lm model directory or a Hugging Face repo id via mlx_lm.utils.load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.nn as nn
from mlx_lm.utils import dequantize_model
from mlx_lm.utils import load as mlx_lm_load

from ..cpu_options import CpuOptions
from .common import (
    cast_floats_to_float32,
    device_name,
    end_token_ids,
    resolve_quantized,
    weights_description,
    widen_floats,
)
from .errors import ModelLoadError
from .progress import ProgressReporter
from .source_check import check_mlx_dir

DEFAULT_CONTEXT = 4096  # when a config names none


def _is_quantized(model: nn.Module) -> bool:
    return any(isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding))
               for _, m in model.named_modules())


def _context_length(config: dict[str, Any], tokenizer: Any) -> int:
    for cfg in (config, config.get("text_config") or {}):
        for key in ("max_position_embeddings", "max_seq_len", "n_positions", "seq_length"):
            if isinstance(cfg.get(key), int) and cfg[key] > 0:
                return cfg[key]
    limit = getattr(tokenizer, "model_max_length", None)
    return limit if isinstance(limit, int) and 0 < limit < 10**7 else DEFAULT_CONTEXT


def _load(source: str, quantized: bool | None, is_dir: bool,
          report: ProgressReporter, cpu: CpuOptions | None) -> dict[str, Any]:
    report("reading file", 0.0)  # mlx-lm reads weights and tokenizer in one call
    try:
        model, tokenizer, config = mlx_lm_load(source, return_config=True)
    except ModelLoadError:
        raise
    except Exception as e:  # mlx-lm raises FileNotFoundError/ValueError/hub errors
        what = ("mlx-lm model directory" if is_dir else
                "Hugging Face repo (needs the hub to be reachable, or the repo in the local "
                "HF cache)")
        raise ModelLoadError(f"{source}: cannot load {what}: {type(e).__name__}: {e}") from e
    report("converting layers", 0.0)
    keep_quantized = resolve_quantized(quantized, cpu)
    if not keep_quantized and _is_quantized(model):
        model = dequantize_model(model)
    if widen_floats(quantized):
        cast_floats_to_float32(model)  # fp16/bf16 matmuls are slow on CPU
    report("tokenizer", 0.0)
    hf_tok = tokenizer._tokenizer
    eos = end_token_ids([*tokenizer.eos_token_ids, hf_tok.eos_token_id], hf_tok.get_vocab(),
                        hf_tok.all_special_tokens)
    tokenizer.eos_token_ids = eos
    name = Path(source).name if is_dir else source
    return {
        "model": model,
        "tokenizer": tokenizer,
        "eos_token_ids": eos,
        "context_length": _context_length(config, tokenizer),
        "source": str(Path(source).resolve()) if is_dir else source,
        "description": f"{name} (mlx-lm), {weights_description(model)} on {device_name()}",
    }


def load_mlx_dir(path: Path, quantized: bool | None = None,
                 report: ProgressReporter | None = None,
                 cpu: CpuOptions | None = None) -> dict[str, Any]:
    check_mlx_dir(path)
    return _load(str(path), quantized, True, report or ProgressReporter(None), cpu)


def load_hf_repo(repo_id: str, quantized: bool | None = None,
                 report: ProgressReporter | None = None,
                 cpu: CpuOptions | None = None) -> dict[str, Any]:
    """Hub download through mlx-lm (uses the local HF cache when offline)."""
    return _load(repo_id, quantized, False, report or ProgressReporter(None), cpu)
