#include "gelu.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels.h"
#include "simd.h"

namespace bc_native {

namespace {

constexpr float kCubic = 0.044715f;
constexpr float kMinusTwoC = -1.5957691216057308f;  // -2 sqrt(2 / pi)

// simd.h's exp8 one lane at a time: the same clip, rounding, polynomial and exponent bits.
float exp1(float x) {
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

void gelu_mul_scalar(const float* g, const float* u, float* y, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) {
    const float x = g[i];
    const float b = std::fma(x * x, kCubic, 1.f);
    const float e = exp1((x * b) * kMinusTwoC);
    y[i] = (x * u[i]) / (1.f + e);
  }
}

#ifdef BC_X86
BC_AVX2 void gelu_mul_avx2(const float* g, const float* u, float* y, int64_t lo, int64_t hi) {
  const __m256 one = _mm256_set1_ps(1.f), cubic = _mm256_set1_ps(kCubic),
               m2c = _mm256_set1_ps(kMinusTwoC);
  int64_t i = lo;
  for (; i + 8 <= hi; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 b = _mm256_fmadd_ps(_mm256_mul_ps(x, x), cubic, one);
    const __m256 e = exp8(_mm256_mul_ps(_mm256_mul_ps(x, b), m2c));
    _mm256_storeu_ps(y + i, _mm256_div_ps(_mm256_mul_ps(x, _mm256_loadu_ps(u + i)),
                                          _mm256_add_ps(one, e)));
  }
  gelu_mul_scalar(g, u, y, i, hi);
}
#endif

}  // namespace

void gelu_tanh_mul_run(const float* g, const float* u, float* y, int64_t size,
                       bool force_scalar) {
#ifdef BC_X86
  if (!force_scalar && cpu_has_avx2_fma()) {
    const int64_t per = 1 << 14;
    const int chunks = (int)((size + per - 1) / per);
    parallel_chunks(chunks, size * 8, [&](int c) {
      gelu_mul_avx2(g, u, y, c * per, std::min(size, (c + 1) * per));
    });
    return;
  }
#endif
  gelu_mul_scalar(g, u, y, 0, size);
}

}  // namespace bc_native
