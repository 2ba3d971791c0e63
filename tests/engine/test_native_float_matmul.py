"""engine.native's fixed-order float product (src/float_matmul.h), the engine's unquantized
linears on the CPU: within float32's summation bound of the exact product, and bitwise the
same for a row alone or in any batch, on the AVX2 and portable paths alike (BLAS is not:
tests/engine/test_batch_invariance.py)."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest

from engine import native
from engine.cpu_options import CpuOptions
from engine.native import float_layers

pytestmark = pytest.mark.usefixtures("native_built")

U = 2.0**-24


def _case(m: int, n: int, k: int, seed: int) -> tuple[mx.array, mx.array]:
    rng = np.random.default_rng(seed)
    return (mx.array(rng.standard_normal((m, k), dtype=np.float32)),
            mx.array(rng.standard_normal((n, k), dtype=np.float32) * 0.05))


def _run(x: mx.array, w: mx.array, scalar: bool = False) -> np.ndarray:
    return np.array(native.float_matmul(x, w, force_scalar=scalar))


@pytest.mark.parametrize(("k", "n"), [(576, 197), (64, 40), (37, 33), (8, 5), (3, 70)])
@pytest.mark.parametrize("scalar", [False, True], ids=["simd", "portable"])
def test_within_float32_summation_bound(k: int, n: int, scalar: bool) -> None:
    x, w = _case(9, n, k, seed=k + n)
    y = _run(x, w, scalar)
    xs, ws = np.array(x, dtype=np.float64), np.array(w, dtype=np.float64)
    exact, bound = xs @ ws.T, (k + 2) * U * (np.abs(xs) @ np.abs(ws).T)
    assert y.shape == (9, n) and np.all(np.abs(y - exact) <= bound)


@pytest.mark.parametrize(("k", "n"), [(576, 200), (160, 37), (37, 21), (1536, 64)])
def test_rows_alone_equal_their_rows_in_any_batch_on_every_path(k: int, n: int) -> None:
    x, w = _case(100, n, k, seed=k * n)
    full = _run(x, w)
    assert np.array_equal(full, _run(x, w, scalar=True))  # AVX2 = portable, bit for bit
    for rows in (1, 2, 3, 4, 5, 8, 31, 32, 33, 64):
        for start in (0, 100 - rows, 7 if rows < 90 else 0):
            part = _run(x[start:start + rows], w)
            assert np.array_equal(part, full[start:start + rows]), (rows, start)


def test_leading_dims_and_strided_inputs() -> None:
    x, w = _case(24, 48, 96, seed=3)
    full = _run(x, w)
    y3 = np.array(native.float_matmul(x.reshape(2, 12, 96), w))
    assert np.array_equal(y3.reshape(24, 48), full)
    t = mx.array(np.ascontiguousarray(np.array(x).T)).T  # a transposed view of x
    assert np.array_equal(_run(t, w), full)
    assert np.array_equal(_run(x, mx.array(np.array(w).T).T), full)


def test_bad_arguments() -> None:
    x, w = _case(2, 8, 32, seed=4)
    with pytest.raises(ValueError, match="float32"):
        native.float_matmul(x.astype(mx.float16), w)
    with pytest.raises(ValueError, match=r"\(N, K\)"):
        native.float_matmul(x, w[:, :16])
    with pytest.raises(ValueError, match=r"\(N, K\)"):
        native.float_matmul(x, w.reshape(2, 4, 32))


def test_the_engine_linear_is_the_kernel_plus_its_bias() -> None:
    """engine_module's NativeFloatLinear keeps nn.Linear's arrays and names, adds its bias
    after the product; a half-precision weight, and BATCHCHAT_INVARIANT=0, keep the stock
    call; a float embedding's tied head (as_linear) runs the kernel too."""
    lin = nn.Linear(40, 24, bias=True)
    mx.eval(lin.parameters())
    mine = float_layers.engine_module(lin, CpuOptions())
    assert type(mine) is float_layers.NativeFloatLinear
    assert set(dict(mine.parameters())) == {"weight", "bias"}
    x = _case(5, 1, 40, seed=6)[0]
    want = _run(x, lin.weight) + np.array(lin.bias)
    assert np.array_equal(np.array(mine(x)), want)
    assert np.allclose(np.array(mine(x)), np.array(lin(x)), atol=1e-5)
    assert float_layers.engine_module(lin, CpuOptions(invariant=False)) is None
    half = nn.Linear(40, 24)
    half.update({"weight": half.weight.astype(mx.float16), "bias": half.bias})
    assert np.array_equal(np.array(float_layers.engine_module(half, CpuOptions())(x)),
                          np.array(half(x)))
    emb = nn.Embedding(30, 40)
    head = float_layers.engine_module(emb, CpuOptions())
    assert np.array_equal(np.array(head.as_linear(x)), _run(x, emb.weight))
    ids = mx.array([[1, 5]])
    assert np.array_equal(np.array(head(ids)), np.array(emb(ids)))
