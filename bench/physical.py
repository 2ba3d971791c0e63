"""This machine's physical limits: memory bandwidth and fp32 GEMM rate (numpy and MLX)."""

from __future__ import annotations

import time

import mlx.core as mx
import numpy as np


def device_description() -> str:
    """MLX's default device and the name of what backs it (CPU model or GPU)."""
    info = mx.device_info() if hasattr(mx, "device_info") else {}
    return f"{mx.default_device()}: {info.get('device_name', '?')}"


def _best(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def memory_bandwidth_gbs(nbytes: int = 256 << 20) -> float:
    """Read+write bandwidth of a large copy (numpy, as many threads as it uses)."""
    a = np.ones(nbytes // 4, dtype=np.float32)
    b = np.empty_like(a)
    np.copyto(b, a)
    t = _best(lambda: np.copyto(b, a))
    return 2 * nbytes / t / 1e9


def gemm_gflops(m: int, k: int, n: int, use_mlx: bool = False) -> float:
    if use_mlx:
        a = mx.random.normal((m, k))
        b = mx.random.normal((k, n))
        mx.eval(a, b)
        mx.eval(a @ b)
        t = _best(lambda: mx.eval(a @ b))
    else:
        a = np.random.rand(m, k).astype(np.float32)
        b = np.random.rand(k, n).astype(np.float32)
        a @ b
        t = _best(lambda: a @ b)
    return 2 * m * k * n / t / 1e9


def reference(num_params: int, weight_bytes: int) -> dict:
    bw = memory_bandwidth_gbs()
    gemm_big = gemm_gflops(2048, 2048, 2048)
    gemm_batch = gemm_gflops(32, 576, 1536)
    gemm_mlx = gemm_gflops(32, 576, 1536, use_mlx=True)
    return {
        "memory_bandwidth_gbs": bw,
        "numpy_gemm_2048_gflops": gemm_big,
        "numpy_gemm_32x576x1536_gflops": gemm_batch,
        "mlx_gemm_32x576x1536_gflops": gemm_mlx,
        "weight_bytes": weight_bytes,
        "num_params": num_params,
        "decode_floor_s": weight_bytes / (bw * 1e9),
        "ceiling_tps": gemm_batch * 1e9 / (2 * num_params),
    }
