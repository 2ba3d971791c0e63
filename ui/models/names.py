"""How a model reads in the window: its short name, and a recent model's line."""

from __future__ import annotations

from pathlib import Path

from app.models.names import model_name


def short_name(source: str) -> str:
    """A model's name for a status line or a button (app.models.names.model_name)."""
    return model_name(source)


def recent_label(source: str) -> str:
    """How a recent model reads in the list: its name, then where it is."""
    if source == "bundled":
        return f"Bundled model — {model_name(source)}"
    path = Path(source).expanduser()
    if "models--" in source:  # a hub cache snapshot: its repo id says more than its hash
        return f"{model_name(source)} — Hugging Face cache"
    if source.startswith(("/", "~", ".")) or path.exists():
        return f"{path.name} — {path.parent}"
    return source  # a Hugging Face repo id
