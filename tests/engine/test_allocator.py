"""engine/allocator.py and engine/preload.py: an entry point re-executes onto mimalloc, which
reuses freed buffers (no fresh page faults) and gives freed memory back; opted out, glibc
tuned by engine/cpu_memory.py serves as before. Each case is a fresh process started as
an entry point starts (tests/engine/allocator_run.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import allocator, blas, preload

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only"),
    pytest.mark.skipif(allocator.mimalloc_path() is None, reason="cmeel-mimalloc not installed"),
    pytest.mark.skipif(blas.cuda_mlx_installed(), reason="CUDA build: nothing is preloaded"),
]
ROOT = Path(__file__).resolve().parents[2]


def _run(**env: str) -> dict:
    full = {k: v for k, v in os.environ.items()
            if k not in ("LD_PRELOAD", preload.GUARD_ENV, preload.SET_ENV, allocator.DISABLE_ENV,
                         *allocator.SETTINGS)}
    full.update(env)
    out = subprocess.run([sys.executable, "-m", "tests.engine.allocator_run"], cwd=ROOT,
                         env=full, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_an_entry_point_runs_on_mimalloc_which_reuses_buffers_and_gives_freed_memory_back():
    got = _run()
    assert got["mimalloc"] and "mimalloc" in got["summary"]
    # glibc is not what serves malloc, so it is neither tuned nor read
    assert not got["tuned"] and not got["heap"]
    live, _, after = got["rise_mib"]
    assert live >= 300  # 384 MiB of buffers were live
    assert got["gave"] and after < 64  # given back, not kept
    # freed 8 MB buffers are mostly reused: glibc's untuned default faults ~6,000 pages in
    # for the same pass (test_cpu_memory); mimalloc, giving freed pages back at once
    # (allocator.SETTINGS), ~800 (docs/memory.md: the batched passes' cost)
    assert got["faults_per_pass"] < 1500
    # the programs it starts (MCP servers) run without what it preloaded for itself
    assert got["child_ld_preload"] is None and got["child_purge_delay"] is None


@pytest.mark.skipif(blas.openblas_path() is None, reason="no system OpenBLAS")
def test_what_the_user_preloaded_stays_for_the_programs_the_app_starts():
    got = _run(LD_PRELOAD=blas.openblas_path(), MIMALLOC_PURGE_DELAY="500")
    assert got["mimalloc"]
    assert got["child_ld_preload"] == blas.openblas_path()  # theirs, not mimalloc
    assert got["child_purge_delay"] == "500"  # theirs, not the re-exec's


def test_opted_out_glibc_is_tuned_and_read_as_before():
    got = _run(**{allocator.DISABLE_ENV: "1"})
    assert not got["mimalloc"] and got["summary"] == "malloc: the C library's"
    assert got["tuned"] and got["heap"]


def test_a_process_already_on_both_libraries_is_not_executed_again(monkeypatch):
    monkeypatch.delenv(allocator.DISABLE_ENV, raising=False)
    monkeypatch.setattr(allocator, "is_mimalloc_loaded", lambda: True)
    monkeypatch.setattr(blas, "blas_to_preload", lambda: None)
    assert preload.libraries_to_preload() == []
    monkeypatch.setattr(allocator, "is_mimalloc_loaded", lambda: False)
    assert preload.libraries_to_preload() == [allocator.mimalloc_path()]
    monkeypatch.setenv(allocator.DISABLE_ENV, "1")
    assert preload.libraries_to_preload() == []


def test_the_environment_for_a_program_the_app_starts_loses_only_what_the_re_exec_added():
    env = {"LD_PRELOAD": "/v/libmimalloc.so:/usr/lib/libopenblas.so.0:/home/u/mine.so",
           preload.GUARD_ENV: "/v/libmimalloc.so:/usr/lib/libopenblas.so.0",
           preload.SET_ENV: "MIMALLOC_PURGE_DELAY", "MIMALLOC_PURGE_DELAY": "0", "PATH": "/bin"}
    assert preload.child_environment(env) == {"LD_PRELOAD": "/home/u/mine.so", "PATH": "/bin"}
    assert preload.child_environment({"PATH": "/bin"}) == {"PATH": "/bin"}  # not re-executed
