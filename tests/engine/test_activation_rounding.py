"""The engine's int8 activation scheme is llama.cpp's Q8_0 rounding (issue #45's parity
analysis, docs/performance.md): bench.activation_rounding's MLX emulation of it in front of a
float32 linear gives the native kernels' output up to float summation order."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from bench.activation_rounding import _rounded


@pytest.mark.usefixtures("native_built")
@pytest.mark.parametrize("bits", [4, 8])
def test_the_emulated_rounding_is_the_kernels(bits: int) -> None:
    from engine import native

    mx.random.seed(bits)
    w = mx.random.normal((48, 576))
    wq, s, b = mx.quantize(w, group_size=32, bits=bits)
    x = mx.random.normal((5, 576)) * mx.exp(mx.random.normal((5, 576)))  # outliers too
    ext = native.extension()
    want = _rounded(x, fp16_step=False) @ mx.dequantize(wq, s, b, group_size=32, bits=bits).T
    kernel = ext.quantized_matvec(x, wq, s, b, 32, bits, int8_x=True)
    packed = ext.packed_matvec_many(x, list(ext.pack_quantized(wq, s, b, 32, bits)), [48], 32,
                                    bits)[0]
    unrounded = x @ mx.dequantize(wq, s, b, group_size=32, bits=bits).T
    scale = float(mx.max(mx.abs(want)))
    for got in (kernel, packed):
        assert float(mx.max(mx.abs(got - want))) < 2e-6 * scale * 576 ** 0.5
    # and the rounding is not nothing: the float32 product is far from both
    assert float(mx.max(mx.abs(unrounded - want))) > 1e-3 * scale


def test_llama_cpps_fp16_step_changes_only_the_step() -> None:
    x = mx.random.normal((3, 64)) * 7
    a, b = np.array(_rounded(x, False)), np.array(_rounded(x, True))
    steps_a = np.abs(a).reshape(3, 2, 32).max(-1) / 127
    np.testing.assert_allclose(a, b, rtol=2 ** -10)
    assert np.all(steps_a > 0)
