"""Page faults of a prefill-like pass, for the tests of what malloc does with freed buffers
(test_cpu_memory, test_allocator): three 8 MB buffers a call of the exp kernel (its two parts
and its result), freed each time."""

from __future__ import annotations

import resource


def faults_per_exp_pass() -> float:
    """Minor page faults per call of the exp kernel on 2M floats, after a warm-up: ~6,000
    where every buffer is faulted in afresh, none where freed buffers are reused."""
    import mlx.core as mx

    from engine import cpu_kernels

    x = mx.random.normal((2_097_152,))
    mx.eval(x)
    for _ in range(3):
        mx.eval(cpu_kernels.exp(x))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        mx.eval(cpu_kernels.exp(x))
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10
