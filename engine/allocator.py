"""mimalloc in place of glibc's malloc on Linux's CPU backend: freed memory goes back.

Why: MLX's CPU backend takes every buffer from `malloc`. glibc keeps what is freed in
per-thread arenas, and the holes a long busy session leaves in their heaps stay resident:
600-900 MiB over MLX's own peak in a 12-round session of 8 chats, past the process's bound
(docs/memory.md). mimalloc gives freed pages back to the system after a short delay
(`purge_delay`: at once here, SETTINGS) and reuses what it has not given back, so buffers
do not fault in afresh on every pass either. It comes from PyPI (`cmeel-mimalloc`, a
manylinux wheel with the shared library), so every Linux install has it, CI included.

How: like OpenBLAS (engine/blas.py), it is preloaded: `engine/preload.py` re-executes the
process once with it in `LD_PRELOAD`. macOS (its own malloc; Metal's buffers) and a CUDA
build of MLX leave it out. `BATCHCHAT_NO_MIMALLOC=1` opts out (glibc, tuned by
engine/cpu_memory.py, as before).

This module imports nothing heavy and never imports `mlx`.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os
import sys
from pathlib import Path

from . import blas

DISABLE_ENV = "BATCHCHAT_NO_MIMALLOC"
# Set for the re-executed process unless already set. Freed pages are given back at once:
# with its default delay (1 s) a busy session's RSS rose ~200 MiB higher within a round
# (a round's buffers come and go faster); the cost is ~6 % on batched passes, whose freed
# activation buffers fault in again (docs/memory.md).
SETTINGS = {"MIMALLOC_PURGE_DELAY": "0"}
_SONAME = "libmimalloc.so"


def mimalloc_path() -> str | None:
    """The shared library from the `cmeel-mimalloc` wheel, or None (not Linux, not
    installed)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        dist = importlib.metadata.distribution("cmeel-mimalloc")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if Path(str(file)).name.startswith(_SONAME):
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return str(path.resolve())
    return None


def is_mimalloc_loaded() -> bool:
    """Whether mimalloc is mapped into this process (it then serves every malloc)."""
    return _loaded_path() is not None


def wanted() -> bool:
    """Whether this process should run on mimalloc: Linux, not opted out."""
    return sys.platform.startswith("linux") and not os.environ.get(DISABLE_ENV)


def give_back_freed_memory() -> bool:
    """Return the freed memory mimalloc still holds now, without waiting for its delay
    (`mi_collect(true)`): for when the engine goes idle. False where it is not loaded."""
    lib = _library()
    if lib is None:
        return False
    lib.mi_collect(True)
    return True


def summary() -> str:
    """One line for logs: which allocator serves malloc."""
    path = _loaded_path()
    return f"malloc: mimalloc ({path}, preloaded)" if path else "malloc: the C library's"


@functools.cache  # preloaded at exec or not at all: it cannot change later
def _loaded_path() -> str | None:
    return next((p for p in blas.mapped_files() if os.path.basename(p).startswith(_SONAME)),
                None)


@functools.cache
def _library() -> ctypes.CDLL | None:
    path = _loaded_path()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
        lib.mi_collect.argtypes, lib.mi_collect.restype = [ctypes.c_bool], None
    except (OSError, AttributeError):
        return None
    return lib
