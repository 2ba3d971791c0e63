#include "gelu.h"

#include <algorithm>
#include <cmath>

#include "exp1.h"
#include "kernels.h"
#include "simd.h"

namespace bc_native {

namespace {

constexpr float kCubic = 0.044715f;
constexpr float kMinusTwoC = -1.5957691216057308f;  // -2 sqrt(2 / pi)

void gelu_mul_scalar(const float* g, const float* u, float* y, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) {
    const float x = g[i];
    const float b = std::fma(x * x, kCubic, 1.f);
    const float e = exp1_cephes((x * b) * kMinusTwoC);
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
