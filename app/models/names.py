"""A model's short name from its source (the model button, banners, recent lists), and the
other names a client may know it by (the API server, the model manager)."""

from __future__ import annotations

import re
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


REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")  # owner/name, as Hugging Face spells repo ids


def aliases_of(source: str | None) -> tuple[str, ...]:
    """The names a client may know a model loaded from `source` by ("bundled", a .gguf
    path, an mlx-lm directory, a repo id)."""
    if not source:
        return ()
    if source == "bundled":
        from engine.public import BUNDLED_FILENAME

        return ("bundled", *_file_names(BUNDLED_FILENAME))
    names: list[str] = []
    if REPO_ID.match(source) and not source.startswith("."):
        names += [source, source.split("/", 1)[1]]  # a repo id, or a path of two parts
    names += _file_names(PurePath(source).name)
    return tuple(dict.fromkeys(n for n in names if n))


def _file_names(name: str) -> list[str]:
    return [name, name[: -len(".gguf")]] if name.lower().endswith(".gguf") else [name]
