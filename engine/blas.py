"""Make MLX's CPU backend use a fast BLAS on Linux.

MLX's Linux CPU wheel links a bundled reference BLAS (netlib): an fp32 matmul of
2048x576x1536 runs at ~6 GFLOP/s on the 2-core dev machine, against ~190 GFLOP/s
when the system OpenBLAS is preloaded (numbers and commands: docs/loader.md).
``LD_PRELOAD`` only takes effect when a process starts, so ``engine/preload.py``
re-executes the interpreter once with the variable set (with mimalloc beside it,
engine/allocator.py), before ``mlx`` is imported.

This module imports nothing heavy and never imports ``mlx``.
"""

from __future__ import annotations

import ctypes.util
import importlib.metadata
import os
import platform
import sys
from pathlib import Path

# Opt-out switch (e.g. to measure the slow path).
DISABLE_ENV = "BATCHCHAT_NO_BLAS_PRELOAD"
# Optional explicit library path.
OVERRIDE_ENV = "BATCHCHAT_OPENBLAS"
_WARNED_ENV = "BATCHCHAT_BLAS_WARNED"

_INSTALL_HINT = "sudo apt-get install libopenblas0-pthread"
_warned = False


def _candidate_paths() -> list[str]:
    machine = platform.machine() or "x86_64"
    multiarch = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu",
                 "arm64": "aarch64-linux-gnu"}.get(machine, f"{machine}-linux-gnu")
    return [
        # Debian/Ubuntu: libopenblas0-pthread (or -openmp/-serial) via alternatives.
        f"/usr/lib/{multiarch}/libopenblas.so.0",
        f"/usr/lib/{multiarch}/openblas-pthread/libopenblas.so.0",
        f"/usr/lib/{multiarch}/openblas-openmp/libopenblas.so.0",
        f"/usr/lib/{multiarch}/openblas-serial/libopenblas.so.0",
        # Fedora/RHEL: openblas-threads / openblas-openmp / openblas.
        "/usr/lib64/libopenblasp.so.0",
        "/usr/lib64/libopenblaso.so.0",
        "/usr/lib64/libopenblas.so.0",
        # Arch, source builds.
        "/usr/lib/libopenblas.so.0",
        "/usr/local/lib/libopenblas.so.0",
        "/opt/OpenBLAS/lib/libopenblas.so.0",
    ]


def openblas_path() -> str | None:
    """The system OpenBLAS shared library, or None if none is installed."""
    override = os.environ.get(OVERRIDE_ENV)
    if override:
        return override if os.path.isfile(override) else None
    if not sys.platform.startswith("linux"):
        return None
    for path in _candidate_paths():
        if os.path.isfile(path):
            return path
    found = ctypes.util.find_library("openblas")  # asks ldconfig; a soname like libopenblas.so.0
    if found:
        for libdir in ("/usr/lib64", "/usr/lib", "/usr/local/lib"):
            path = os.path.join(libdir, found)
            if os.path.isfile(path):
                return path
    return None


def mapped_files() -> list[str]:
    """Paths of the files mapped into this process, each once (Linux's /proc/self/maps;
    empty elsewhere): which libraries are loaded (OpenBLAS here, mimalloc in
    engine/allocator.py)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    paths = (line.split(maxsplit=5) for line in maps.splitlines())
    return list(dict.fromkeys(parts[5] for parts in paths if len(parts) == 6))


def _loaded_blas_libraries() -> list[str]:
    """Paths of BLAS-like libraries mapped into this process (Linux only)."""
    return [p for p in mapped_files() if "blas" in os.path.basename(p).lower()]


def _is_interposing_openblas(path: str) -> bool:
    name = os.path.basename(path).lower()
    # numpy/scipy wheels bundle "scipy_openblas" with prefixed symbols: it does not
    # replace the cblas_sgemm that MLX calls, so it does not count.
    return "openblas" in name and "scipy_openblas" not in name and ".libs/" not in path


def is_fast_blas_loaded() -> bool:
    """True if an OpenBLAS that MLX will use is mapped in (always True on macOS)."""
    if sys.platform == "darwin":
        return True  # MLX uses Accelerate there
    return any(_is_interposing_openblas(p) for p in _loaded_blas_libraries())


def cuda_mlx_installed() -> bool:
    """Whether a CUDA build of MLX is installed (checked without importing mlx)."""
    for dist in importlib.metadata.distributions():
        name = (dist.metadata.get("Name") or "").lower().replace("_", "-")
        if name.startswith("mlx-cuda"):
            return True
    return False


def _warn_once(message: str) -> None:
    global _warned
    if _warned or os.environ.get(_WARNED_ENV):
        return
    _warned = True
    os.environ[_WARNED_ENV] = "1"  # children (re-execs, workers) stay quiet
    print(message, file=sys.stderr, flush=True)


def blas_to_preload() -> str | None:
    """The OpenBLAS library this process should preload, or None: not Linux, a CUDA build
    of MLX, already loaded, or opted out (``BATCHCHAT_NO_BLAS_PRELOAD``). Warns once, with
    the install command, when the system has none. engine/preload.py re-executes with it."""
    if not sys.platform.startswith("linux") or os.environ.get(DISABLE_ENV):
        return None
    if is_fast_blas_loaded() or cuda_mlx_installed():
        return None
    lib = openblas_path()
    if lib is None:
        _warn_once(
            "batchchat: warning: no system OpenBLAS found. MLX's CPU backend will use its "
            "bundled reference BLAS: float32 matrix products ~30x slower (6 vs 190 GFLOP/s "
            "measured on 2 cores), prompt processing ~15x and token generation ~2.3x "
            "slower. Install it with: "
            f"{_INSTALL_HINT}  (set {DISABLE_ENV}=1 to silence this)"
        )
    return lib


def blas_summary() -> str:
    """One line for logs and the UI: which BLAS MLX's CPU backend uses."""
    if sys.platform == "darwin":
        return "BLAS: Apple Accelerate"
    if cuda_mlx_installed():
        return "BLAS: CUDA build of MLX (cuBLAS on GPU)"
    fast = [p for p in _loaded_blas_libraries() if _is_interposing_openblas(p)]
    if fast:
        return f"BLAS: OpenBLAS ({fast[0]}, preloaded)"
    lib = openblas_path()
    if lib:
        return f"BLAS: MLX bundled reference BLAS (slow; OpenBLAS at {lib} not preloaded)"
    return f"BLAS: MLX bundled reference BLAS (slow; {_INSTALL_HINT})"
