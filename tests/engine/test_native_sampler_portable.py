"""The native sampler's plain loops (what a CPU without AVX2 runs, e.g. ARM Linux) draw the
same tokens as its AVX2 loops: engine/native/src/sample.cpp is built twice here with g++, once
as the extension builds it and once with BC_PORTABLE (no SIMD), behind a small driver, and
both are fed the same rows. The AVX2 build's tokens are also the extension's, so the driver
runs the code the engine runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from engine import native

pytestmark = [pytest.mark.usefixtures("native_built"),
              pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")]

SRC = Path(__file__).resolve().parents[2] / "engine" / "native" / "src"

# reads B, V, then logits (B, V), u (B,), params (B, 4) as float32; prints one token a row
DRIVER = r"""
#include <cstdio>
#include <functional>
#include <vector>
#include "sample.h"
namespace bc_native {
bool cpu_has_avx2_fma() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
void parallel_chunks(int chunks, long, const std::function<void(int)>& fn) {
  for (int i = 0; i < chunks; ++i) fn(i);
}
int qmv_threads() { return 1; }
}  // namespace bc_native
int main(int, char** argv) {
  FILE* f = std::fopen(argv[1], "rb");
  int dims[2];
  if (std::fread(dims, 4, 2, f) != 2) return 1;
  const int B = dims[0], V = dims[1];
  std::vector<float> logits((size_t)B * V), u(B), params((size_t)B * 4);
  if (std::fread(logits.data(), 4, logits.size(), f) != logits.size()) return 1;
  if (std::fread(u.data(), 4, u.size(), f) != u.size()) return 1;
  if (std::fread(params.data(), 4, params.size(), f) != params.size()) return 1;
  std::fclose(f);
  std::vector<int32_t> out(B);
  bc_native::sample_run({logits.data(), u.data(), params.data(), out.data(), B, V});
  for (int32_t t : out) std::printf("%d\n", t);
}
"""


@pytest.fixture(scope="module")
def drivers(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("sampler")
    (d / "driver.cpp").write_text(DRIVER)
    out = {}
    for name, flags in (("simd", []), ("portable", ["-DBC_PORTABLE"])):
        out[name] = d / name
        subprocess.run(["g++", "-O2", "-std=c++17", *flags, f"-I{SRC}", str(d / "driver.cpp"),
                        str(SRC / "sample.cpp"), "-o", str(out[name])], check=True)
    return out


def _rows(v: int) -> np.ndarray:
    rng = np.random.default_rng(4)
    flat = rng.normal(0, 0.48, v)  # a random-weight model's row
    ties = np.round(rng.normal(0, 0.05, v) * 16) / 16  # few values, thousands at the cut
    peaked = rng.normal(0, 1, v)
    peaked[rng.integers(v)] += 9
    spread = rng.normal(0, 3, v)
    holes = rng.normal(0, 0.5, v)
    holes[::7] = -np.inf  # masked tokens (a grammar's)
    return np.stack([flat, ties, peaked, spread, holes]).astype(np.float32)


@pytest.mark.parametrize("v", [151936, 49157])  # one not a multiple of 8: the loops' tails
def test_the_plain_loops_draw_the_avx2_loops_tokens(drivers, tmp_path, v) -> None:
    rows = _rows(v)
    grid = [[0.7, 0.95, 0.05, 0], [1.0, 0.9, 0.0, 0], [0.3, 0.5, 0.1, 0],
            [1.2, 0.0, 0.02, 0], [0.7, 0.9, 0.02, 40], [1.0, 0.0, 0.0, 0]]
    cases = [(r, p, (k + 0.5) / 7) for r in range(len(rows)) for p in grid for k in range(7)]
    logits = rows[[r for r, _, _ in cases]]
    u = np.array([x for _, _, x in cases], dtype=np.float32)
    params = np.array([p for _, p, _ in cases], dtype=np.float32)
    data = tmp_path / "rows.bin"
    data.write_bytes(np.array(logits.shape, dtype=np.int32).tobytes() + logits.tobytes()
                     + u.tobytes() + params.tobytes())
    got = {name: [int(t) for t in subprocess.run([str(exe), str(data)], check=True,
                                                  capture_output=True, text=True).stdout.split()]
           for name, exe in drivers.items()}
    engine = np.array(native.sample_tokens(mx.array(logits), mx.array(u),
                                           mx.array(params))).tolist()
    assert got["simd"] == engine
    assert got["portable"] == got["simd"]
    assert len(set(engine)) > len(rows) * 5  # the grid really draws different tokens
