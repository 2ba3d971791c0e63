"""Which llama.cpp vision projectors (an `mmproj*.gguf` beside a GGUF, `--mmproj`) the engine
pairs with a text GGUF, read from headers alone (no MLX: the loader and the model library
both ask)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

# llama.cpp's projector type (clip.projector_type, conversion/*.py) -> the text GGUF
# architectures it pairs with, each onto mlx-vlm's classes: Gemma 3's SigLIP and
# average-pooling projector, Idefics3 / SmolVLM's SigLIP and pixel-shuffle connector,
# Qwen2-VL / Qwen2.5-VL / Qwen3-VL's tower and patch merger (with the text GGUF's M-RoPE;
# Qwen3-VL's DeepStack mergers too), Mistral 3's Pixtral tower and patch-merging projector
# (its text GGUF mistral3, or llama as older conversions wrote it) or Pixtral 12B's LLaVA-style
# projector without a merger (its text GGUF llama), LFM2-VL's SigLIP2 tower
# and pixel-unshuffle projector, Gemma 4's own vision encoder and embedder (gemma4v; its
# text GGUF gemma4).
PROJECTORS: dict[str, tuple[str, ...]] = {
    "gemma3": ("gemma3",), "idefics3": ("llama",), "pixtral": ("mistral3", "llama"),
    "lfm2": ("lfm2",), "gemma4v": ("gemma4",),
    "qwen2vl_merger": ("qwen2vl",), "qwen2.5vl_merger": ("qwen2vl",),
    "qwen3vl_merger": ("qwen3vl",)}


def is_mmproj(path: Path) -> bool:
    """A GGUF named as a vision projector (llama.cpp's mmproj-*.gguf), not a model."""
    return path.suffix.lower() == ".gguf" and path.name.lower().startswith("mmproj")


def mmproj_beside(path: Path) -> Path | None:
    """The mmproj*.gguf in a model GGUF's folder (the first by name), or None."""
    if is_mmproj(path):
        return None
    try:
        return next(iter(sorted(p for p in path.parent.glob("*.gguf") if is_mmproj(p))), None)
    except OSError:
        return None


def projector_type(metadata: Mapping[str, Any]) -> str | None:
    """An mmproj's projector type (clip.projector_type, or the vision one of a file with
    an audio encoder too), or None when the file is no CLIP projector."""
    if metadata.get("general.architecture") != "clip":
        return None
    kind = metadata.get("clip.vision.projector_type") or metadata.get("clip.projector_type")
    return str(kind) if kind else None


def projector_refusal(metadata: Mapping[str, Any], text_arch: str | None) -> str | None:
    """Why the mmproj of `metadata` cannot give images to a text GGUF of `text_arch`
    (None: it can; `text_arch` None: any the projector type pairs with); the reason names
    the projector type."""
    if metadata.get("general.architecture") != "clip":
        return (f"it is not a CLIP projector (its architecture is "
                f"{metadata.get('general.architecture') or 'unknown'})")
    if metadata.get("clip.has_vision_encoder") is False:
        return "the projector has no vision encoder (audio only)"
    kind = projector_type(metadata)
    if kind not in PROJECTORS:
        return (f"projector type {kind or 'unknown'!r} is not one the engine maps "
                f"({', '.join(PROJECTORS)} so far; the model's mlx-vlm folder may run its "
                "images: docs/loader.md)")
    if text_arch is not None and text_arch not in PROJECTORS[kind]:
        return (f"projector type {kind!r} does not pair with a {text_arch} "
                f"GGUF (it pairs with {', '.join(PROJECTORS[kind])})")
    return None
