"""Configure and build the native extension with CMake (`python -m engine.native build`).

Needs cmake >= 3.24, a C++20 compiler, and the `nanobind` Python package at the version MLX
was built with (its type registry is shared with mlx.core; 3.1.0 for mlx 0.32.4).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent
BUILD_DIR = SOURCE_DIR / "_build"
LIB_DIR = BUILD_DIR / "lib"


def missing_tools() -> list[str]:
    """What the build needs and this machine lacks (empty when a build can be tried)."""
    missing = [tool for tool in ("cmake",) if shutil.which(tool) is None]
    if not any(shutil.which(cxx) for cxx in (os.environ.get("CXX", "c++"), "g++", "clang++")):
        missing.append("a C++ compiler (g++ or clang++)")
    try:
        import nanobind  # noqa: F401
    except ImportError:
        missing.append("the nanobind Python package")
    return missing


def build(quiet: bool = False, jobs: int | None = None) -> Path:
    """Builds the extension into engine/native/_build/lib; returns that folder.

    Raises RuntimeError with the tool output when a step fails.
    """
    missing = missing_tools()
    if missing:
        raise RuntimeError("cannot build engine.native: missing " + ", ".join(missing))
    configure = ["cmake", "-S", str(SOURCE_DIR), "-B", str(BUILD_DIR),
                 "-DCMAKE_BUILD_TYPE=Release", f"-DPython_EXECUTABLE={sys.executable}"]
    compile_ = ["cmake", "--build", str(BUILD_DIR), "-j", str(jobs or os.cpu_count() or 2)]
    for cmd in (configure, compile_):
        res = subprocess.run(cmd, capture_output=quiet, text=True)
        if res.returncode != 0:
            out = (res.stdout or "") + (res.stderr or "") if quiet else ""
            raise RuntimeError(f"{' '.join(cmd)} failed (exit {res.returncode})\n{out[-4000:]}")
    return LIB_DIR


def ensure_built() -> str | None:
    """Builds the extension if it does not load and the tools exist (tests, CI).

    Returns None when the kernels are usable afterwards, else the reason they are not.
    """
    from . import reset, unavailable_reason

    reset()
    if unavailable_reason() is None:
        return None
    if missing_tools():
        return f"not built, and cannot build: missing {', '.join(missing_tools())}"
    build(quiet=True)  # a failing build raises: in CI that must fail, not skip
    reset()
    return unavailable_reason()
