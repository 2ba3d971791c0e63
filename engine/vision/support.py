"""Which vision-language models the engine runs, read from a config alone (no MLX: the
loader and the model library both ask)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The VLM families the engine runs: those whose language model takes plain positions (RoPE
# by token index), whose image request's prefill is an ordinary text prefill of its
# embeddings (Gemma 4's rows fed as its merge scales them: engine/vision/scaled_rows.py; its
# image tokens attending both ways where its config says: image_blocks.py), and
# Qwen2-VL / 2.5-VL / 3-VL, whose M-RoPE gives image tokens 3-D positions and
# shifts the text after them (engine/vision/mrope.py; Qwen3-VL's DeepStack: deepstack.py).
SUPPORTED = ("idefics3", "smolvlm", "gemma3", "qwen2_vl", "qwen2_5_vl", "qwen3_vl",
             "qwen3_vl_moe", "mistral3", "pixtral", "lfm2-vl", "gemma4")
NOT_YET: dict[str, str] = {}


def is_vision_config(config: Any) -> bool:
    """Whether a model's config.json describes a VLM (it has a vision config)."""
    return isinstance(config, dict) and isinstance(config.get("vision_config"), dict)


def vision_refusal(model_type: str | None,
                   config: dict[str, Any] | None = None) -> str | None:
    """Why this engine cannot run a VLM of `model_type` yet (None: it can). `config` (its
    config.json, where given) is for a family refused by a setting; none is now (Gemma 4
    whose image tokens attend both ways runs: image_blocks.py)."""
    if model_type in SUPPORTED:
        return None
    reason = NOT_YET.get(model_type or "")
    if reason:
        return f"a {model_type} vision model: {reason}"
    return (f"a {model_type or 'unknown'} vision model: the engine runs images for "
            f"{', '.join(SUPPORTED)} so far")


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """A VLM config's language model part: its `text_config`, or the config itself where
    the text model's keys are at the top (Qwen2-VL / 2.5-VL's own config.json)."""
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def read_config(path: Path) -> dict[str, Any] | None:
    """A directory's config.json, or None when it has none or it is unreadable."""
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None
