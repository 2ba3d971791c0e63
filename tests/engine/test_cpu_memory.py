"""glibc malloc tuning: large MLX CPU buffers are reused instead of faulting in fresh pages."""

import os
import subprocess
import sys

import pytest

from engine import cpu_memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")

# Three 8 MB buffers per call (the exp kernel's two parts and its result), freed each time:
# the pattern of a prefill pass. Prints minor page faults per call after a warm-up.
_PROBE = """
import sys
from engine import cpu_memory
tuned = sys.argv[1] == "tune" and cpu_memory.keep_freed_memory()
from tests.engine.page_faults import faults_per_exp_pass
print(tuned, faults_per_exp_pass())
"""


def _probe(disable: bool) -> tuple[bool, float]:
    out = subprocess.run([sys.executable, "-c", _PROBE, "off" if disable else "tune"],
                         capture_output=True, text=True, check=True,
                         cwd=os.getcwd()).stdout.split()
    return out[0] == "True", float(out[1])


def test_tuning_stops_page_faults_on_freed_buffers_and_can_be_turned_off():
    tuned, faults_tuned = _probe(disable=False)
    untuned, faults_untuned = _probe(disable=True)
    assert tuned and not untuned
    # 24 MB of fresh pages is ~6,000 faults; reused memory faults (almost) never.
    assert faults_untuned > 1000
    assert faults_tuned < faults_untuned / 20


def test_the_runner_tunes_only_when_the_options_ask(tiny, monkeypatch):
    """CpuOptions.malloc_tuning (BATCHCHAT_NO_MALLOC_TUNING=1: False) decides, on the CPU."""
    import mlx.core as mx

    from engine.cpu_options import CpuOptions
    from engine.model_runner import ModelRunner

    calls: list[int] = []
    monkeypatch.setattr(cpu_memory, "keep_freed_memory", lambda: calls.append(1) or True)
    ModelRunner(tiny.model, cpu=CpuOptions(malloc_tuning=False))
    assert calls == []
    ModelRunner(tiny.model, cpu=CpuOptions())
    assert calls == ([1] if mx.default_device() == mx.cpu else [])


def test_keep_freed_memory_is_idempotent():
    first = cpu_memory.keep_freed_memory()
    assert cpu_memory.keep_freed_memory() is first
