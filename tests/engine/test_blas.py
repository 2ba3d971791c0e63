"""engine.blas: OpenBLAS discovery, detection and the LD_PRELOAD re-exec (engine/preload.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import allocator, blas, preload

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
ROOT = Path(__file__).resolve().parents[2]
PROBE = ("from engine.preload import ensure_preloads; "
         "from engine.blas import is_fast_blas_loaded, blas_summary; "
         "ensure_preloads(); import mlx.core; "
         "print(is_fast_blas_loaded()); print(blas_summary())")


def run_probe(**env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items()
            if k not in ("LD_PRELOAD", preload.GUARD_ENV, blas.DISABLE_ENV, blas.OVERRIDE_ENV,
                         allocator.DISABLE_ENV, "BATCHCHAT_BLAS_WARNED")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=120)


def test_openblas_path_is_a_file_or_none() -> None:
    path = blas.openblas_path()
    assert path is None or os.path.isfile(path)


def test_numpy_bundled_openblas_does_not_count() -> None:
    # numpy's scipy_openblas has prefixed symbols: it cannot speed up MLX.
    assert not blas._is_interposing_openblas(
        "/x/site-packages/numpy.libs/libscipy_openblas64_-32a4b2a6.so")
    assert blas._is_interposing_openblas(
        "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so")


def test_is_fast_blas_loaded_matches_ld_preload() -> None:
    preloaded = "openblas" in os.environ.get("LD_PRELOAD", "")
    assert blas.is_fast_blas_loaded() == preloaded
    assert blas.blas_summary().startswith("BLAS: ")


@pytest.mark.skipif(blas.openblas_path() is None or blas.cuda_mlx_installed(),
                    reason="no system OpenBLAS")
def test_ensure_preloads_reexecs_with_preload() -> None:
    out = run_probe()
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "True"
    assert "OpenBLAS" in out.stdout and "preloaded" in out.stdout


def test_opt_out_keeps_reference_blas() -> None:
    out = run_probe(BATCHCHAT_NO_BLAS_PRELOAD="1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "False"
    assert out.stderr.count("no system OpenBLAS") == 0


@pytest.mark.skipif(blas.cuda_mlx_installed(), reason="CUDA build: nothing to do")
def test_warns_once_when_no_openblas() -> None:
    out = run_probe(BATCHCHAT_OPENBLAS="/nonexistent/libopenblas.so.0")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "False"
    assert out.stderr.count("no system OpenBLAS") == 1
    assert "apt-get install libopenblas0-pthread" in out.stderr
