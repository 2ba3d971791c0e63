"""Files the tests build from other files (a model re-quantized by gguf-py: ~4 CPU-s each),
made once a test session and copied for each caller, shared by the xdist workers.

Keyed by a hash of the source file's bytes and the recipe, so a changed source is a different
key, never a stale file. The folder is set by tests/conftest.py's session fixture (under the
session's base temp folder, which the workers share); outside pytest nothing is kept."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

folder: Path | None = None  # set for the session by tests/conftest.py


def file_hash(path: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def made_once(source: Path, recipe: str, dest: Path, make: Callable[[Path], object]) -> Path:
    """`dest` as `make(dest)` writes it from `source` by `recipe`: made once a session (the
    first caller makes it while later ones wait on a lock), then copied (a test may change
    its copy)."""
    if folder is None:
        make(dest)
        return dest
    key = hashlib.blake2b(f"{file_hash(source)}|{recipe}".encode(), digest_size=16).hexdigest()
    kept = folder / f"{key}{dest.suffix}"
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(kept) + ".lock"):
        if not kept.exists():
            part = kept.with_name(kept.name + f".{os.getpid()}.part")
            make(part)
            part.replace(kept)  # whole or absent
    shutil.copyfile(kept, dest)
    return dest
