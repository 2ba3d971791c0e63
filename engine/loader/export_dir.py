"""Write a loaded model as an mlx-lm model directory.

So a third-party server (`mlx_lm.server`, for the benchmark and the remote-backend tests)
can load exactly the weights the engine runs: the dequantized float32 of the bundled GGUF
on the CPU, or whatever `load_model` produced elsewhere.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ModelLoadError

if TYPE_CHECKING:
    from . import LoadedModel


def _name(loaded: LoadedModel) -> str:
    return getattr(loaded, "source", "") or "the model"


def model_config(loaded: LoadedModel) -> dict[str, Any]:
    """config.json for the model: its mlx-lm ModelArgs, with the context length."""
    args = getattr(loaded.model, "args", None)
    if args is None or not dataclasses.is_dataclass(args):
        raise ModelLoadError(f"{_name(loaded)}: the model has no mlx-lm ModelArgs to export")
    config = {k: v for k, v in dataclasses.asdict(args).items() if v is not None}
    config["max_position_embeddings"] = loaded.context_length
    return config


def save_mlx_dir(loaded: LoadedModel, dest: Path) -> Path:
    """Weights, config, tokenizer (with its chat template) and end tokens under `dest`."""
    import mlx.nn as nn
    from mlx_lm.utils import save_config, save_model

    layers = getattr(getattr(loaded.model, "model", None), "layers", [])
    rope = getattr(getattr(layers[0], "self_attn", None), "rope", None) if layers else None
    if type(rope) is nn.RoPE and "_freqs" in rope:
        # A GGUF's rope_freqs tensor is set on plain RoPE layers at load (engine/loader/gguf.py);
        # config.json cannot say it. (Llama-3 style RoPE keeps its own in rope_scaling.)
        raise ModelLoadError(f"{_name(loaded)}: per-dimension RoPE frequencies cannot be "
                             "exported to an mlx-lm directory")
    dest.mkdir(parents=True, exist_ok=True)
    save_model(dest, loaded.model)
    save_config(model_config(loaded), dest / "config.json")
    loaded.tokenizer._tokenizer.save_pretrained(str(dest))
    # mlx-lm reads the end tokens from here; the template's end-of-turn token is one of them.
    (dest / "generation_config.json").write_text(
        json.dumps({"eos_token_id": sorted(loaded.eos_token_ids)}))
    return dest
