// One float's exp with the Cephes polynomial of simd.h's exp8 (and engine/cpu_kernels.py):
// the same clip, rounding, fused multiply-adds and exponent bits, so a scalar loop and an
// AVX2 loop agree bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace bc_native {

__attribute__((noinline)) inline float exp1_cephes(float x) {
  x = std::min(std::max(x, -88.f), 88.5f);
  const float t = x * 1.4426950408889634f;
  const float n = std::nearbyint(t);
  const float f = t - n;
  float p = 1.535336188319500e-4f;
  p = std::fma(p, f, 1.339887440266574e-3f);
  p = std::fma(p, f, 9.618437357674640e-3f);
  p = std::fma(p, f, 5.550332471162809e-2f);
  p = std::fma(p, f, 2.402264791363012e-1f);
  p = std::fma(p, f, 6.931472028550421e-1f);
  p = std::fma(p, f, 1.f);
  const int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace bc_native
