"""Start on the libraries that make MLX's CPU backend fast and lean: re-exec once with them
in ``LD_PRELOAD``.

Two libraries are preloaded on Linux's CPU backend: the system OpenBLAS (engine/blas.py:
MLX's bundled BLAS is ~30x slower) and mimalloc (engine/allocator.py: freed memory goes back
to the system). ``LD_PRELOAD`` only takes effect when a process starts, so
``ensure_preloads()`` re-executes the interpreter once with them. Call it at the very start
of an entry point, before ``mlx`` is imported.

This module imports nothing heavy and never imports ``mlx``.
"""

from __future__ import annotations

import os
import sys

from . import allocator, blas

# Set in the re-executed process so a failed preload can never loop; it holds the libraries
# the re-exec put in LD_PRELOAD, and SET_ENV the settings variables it set, so the tools the
# app starts (MCP servers) get the environment without them (child_environment).
GUARD_ENV = "BATCHCHAT_PRELOAD_REEXEC"
SET_ENV = "BATCHCHAT_PRELOAD_SET"


def libraries_to_preload() -> list[str]:
    """What this process lacks of what it should run on (empty: nothing to do)."""
    if not sys.platform.startswith("linux") or blas.cuda_mlx_installed():
        return []
    libs = []
    if allocator.wanted() and not allocator.is_mimalloc_loaded():
        path = allocator.mimalloc_path()
        if path:
            libs.append(path)
    lib = blas.blas_to_preload()
    if lib:
        libs.append(lib)
    return libs


def ensure_preloads(argv: list[str] | None = None) -> None:
    """Re-exec this process with OpenBLAS and mimalloc preloaded, where that helps.

    ``argv`` is the full command line to re-run (default ``sys.orig_argv``, which keeps
    ``-m`` and interpreter flags); the interpreter is always ``sys.executable``. Does
    nothing on macOS, with a CUDA build of MLX, when both are loaded or opted out
    (``BATCHCHAT_NO_BLAS_PRELOAD``, ``BATCHCHAT_NO_MIMALLOC``), or inside the re-exec.
    """
    if os.environ.get(GUARD_ENV):
        return
    libs = libraries_to_preload()
    if not libs:
        return
    env = dict(os.environ)
    if allocator.mimalloc_path() in libs:
        settings = {k: v for k, v in allocator.SETTINGS.items() if k not in env}
        env.update(settings)
        env[SET_ENV] = ",".join(settings)
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = ":".join([*libs, preload] if preload else libs)
    env[GUARD_ENV] = ":".join(libs)
    args = list(argv) if argv is not None else list(getattr(sys, "orig_argv", sys.argv))
    if not args:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *args[1:]], env)


def child_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """`environ` (default: this process's) less what `ensure_preloads` added: the libraries
    it preloaded (the user's own LD_PRELOAD entries stay) and the settings it set. For the
    programs the app starts, which should run as they would without BatchChat."""
    env = dict(os.environ if environ is None else environ)
    added = {p for p in env.pop(GUARD_ENV, "").split(":") if p}
    for key in filter(None, env.pop(SET_ENV, "").split(",")):
        env.pop(key, None)
    if added and "LD_PRELOAD" in env:
        rest = [p for p in env["LD_PRELOAD"].split(":") if p and p not in added]
        if rest:
            env["LD_PRELOAD"] = ":".join(rest)
        else:
            del env["LD_PRELOAD"]
    return env
