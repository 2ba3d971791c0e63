"""A model's short name from its source, for the model button, banners and recent lists."""

from __future__ import annotations

from pathlib import Path, PurePath

BUNDLED_SHORT = "SmolLM2-135M-Instruct"


def model_name(source: str) -> str:
    """"SmolLM2-135M-Instruct" for "bundled", "org/name" for a hub cache snapshot (and
    "org/name/file" for a GGUF in one), the file or folder name of a path, else the repo id."""
    if source == "bundled":
        return BUNDLED_SHORT
    if not source.startswith(("/", "~", ".")) and not Path(source).exists():
        return source  # a repo id
    parts = PurePath(source).parts
    for i, part in enumerate(parts[:-2]):
        if part.startswith("models--") and parts[i + 1] == "snapshots":
            repo = part.removeprefix("models--").replace("--", "/")
            inside = "/".join(parts[i + 3:])
            return f"{repo}/{inside.removesuffix('.gguf')}" if inside else repo
    return PurePath(source).name.removesuffix(".gguf") or source
