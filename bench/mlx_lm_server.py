"""`mlx_lm.server` in a subprocess, on exactly the weights the engine runs.

The model is exported as an mlx-lm directory (engine/loader/export_dir.py) and the server
gets the engine's CPU conditions: OpenBLAS preloaded and the same glibc malloc tuning
(engine/cpu_memory.py), set through glibc's environment variables.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.blas import openblas_path
from engine.cpu_memory import MMAP_THRESHOLD, TRIM_THRESHOLD


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlx_lm.server exited with {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"mlx_lm.server not ready after {timeout_s:.0f} s")


@contextlib.contextmanager
def mlx_lm_server(loaded: Any, log: Path | None = None,
                  timeout_s: float = 180.0) -> Iterator[str]:
    """Start it on loopback, yield its base URL, stop it on exit."""
    from engine.loader.export_dir import save_mlx_dir

    with tempfile.TemporaryDirectory(prefix="batchchat-mlx-lm-") as tmp:
        model_dir = save_mlx_dir(loaded, Path(tmp) / "model")
        port = free_port()
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(MMAP_THRESHOLD),
                   MALLOC_TRIM_THRESHOLD_=str(TRIM_THRESHOLD))
        blas = openblas_path()
        if blas:
            env["LD_PRELOAD"] = ":".join(filter(None, [blas, env.get("LD_PRELOAD")]))
        out = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115
        proc = subprocess.Popen([sys.executable, "-m", "mlx_lm.server", "--model",
                                 str(model_dir), "--host", "127.0.0.1", "--port", str(port)],
                                env=env, stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url, proc, timeout_s)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if log:
                out.close()
