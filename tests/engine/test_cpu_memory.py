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
import resource, sys
from engine import cpu_memory
tuned = cpu_memory.keep_freed_memory()
import mlx.core as mx
from engine import cpu_kernels
x = mx.random.normal((2_097_152,))
mx.eval(x)
for _ in range(3):
    mx.eval(cpu_kernels.exp(x))
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    mx.eval(cpu_kernels.exp(x))
print(tuned, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


def _probe(disable: bool) -> tuple[bool, float]:
    env = dict(os.environ)
    env.pop(cpu_memory.DISABLE_ENV, None)
    if disable:
        env[cpu_memory.DISABLE_ENV] = "1"
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                         text=True, check=True, cwd=os.getcwd()).stdout.split()
    return out[0] == "True", float(out[1])


def test_tuning_stops_page_faults_on_freed_buffers_and_can_be_turned_off():
    tuned, faults_tuned = _probe(disable=False)
    untuned, faults_untuned = _probe(disable=True)
    assert tuned and not untuned
    # 24 MB of fresh pages is ~6,000 faults; reused memory faults (almost) never.
    assert faults_untuned > 1000
    assert faults_tuned < faults_untuned / 20


def test_keep_freed_memory_is_idempotent():
    first = cpu_memory.keep_freed_memory()
    assert cpu_memory.keep_freed_memory() is first
