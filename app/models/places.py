"""Where models live on this disk, read from the environment each time (tests set it)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from engine.public import model_cache_dir

BATCHCHAT = "BatchChat"
HUGGING_FACE = "Hugging Face"
LM_STUDIO = "LM Studio"
FOLDER = "Folder"


def batchchat_dir() -> Path:
    """BatchChat's own models (the bundled one among them): $BATCHCHAT_MODEL_DIR, else
    ~/.cache/batchchat/models."""
    return model_cache_dir()


def hub_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The Hugging Face hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else
    ~/.cache/huggingface/hub (as huggingface_hub decides, but read now, not at import)."""
    env = os.environ if env is None else env
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    xdg = env.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "huggingface" / "hub"


def lm_studio_dirs() -> list[Path]:
    """LM Studio's model folders (the current and the older location)."""
    home = Path.home()
    return [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]


def hub_endpoint(env: Mapping[str, str] | None = None) -> str:
    """The hub to download from: $HF_ENDPOINT, else huggingface.co."""
    env = os.environ if env is None else env
    return (env.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
