#include "rowwise.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels.h"
#include "simd.h"

namespace bc_native {

void rope_run(const RopeArgs& a) {
  const int half = a.dims / 2;
  // One cos/sin table per (batch row, position), shared by the heads; double precision then
  // rounded, so the angles' cos and sin are the correctly rounded float values.
  std::vector<float> cs((size_t)a.T * half * 2);
  for (int b = 0; b < a.B; ++b) {
    const int32_t off = a.offset[a.n_offsets == 1 ? 0 : b];
    for (int t = 0; t < a.T; ++t) {
      const float pos = (float)(off + t) * a.scale;  // float32 as MLX computes it
      for (int i = 0; i < half; ++i) {
        const float theta = pos * a.inv_freq[i];
        cs[((size_t)t * half + i) * 2] = (float)std::cos((double)theta);
        cs[((size_t)t * half + i) * 2 + 1] = (float)std::sin((double)theta);
      }
    }
    for (int h = 0; h < a.H; ++h) {
      for (int t = 0; t < a.T; ++t) {
        const float* x = a.x + b * a.xs[0] + h * a.xs[1] + t * a.xs[2];
        float* y = a.out + (((size_t)b * a.H + h) * a.T + t) * a.D;
        const float* c = cs.data() + (size_t)t * half * 2;
        for (int i = 0; i < half; ++i) {
          const int i1 = a.traditional ? 2 * i : i;
          const int i2 = a.traditional ? 2 * i + 1 : i + half;
          const float x1 = x[i1], x2 = x[i2], co = c[2 * i], si = c[2 * i + 1];
          y[i1] = x1 * co - x2 * si;
          y[i2] = x1 * si + x2 * co;
        }
        for (int d = a.dims; d < a.D; ++d) y[d] = x[d];
      }
    }
  }
}

namespace {

void rms_rows_scalar(const float* x, const float* w, float* y, int64_t rows, int n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float ss = 0.f;
    for (int i = 0; i < n; ++i) ss += xr[i] * xr[i];
    const float inv = 1.f / std::sqrt(ss / (float)n + eps);
    for (int i = 0; i < n; ++i) yr[i] = w ? (xr[i] * inv) * w[i] : xr[i] * inv;
  }
}

void silu_mul_scalar(const float* g, const float* u, float* y, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) y[i] = g[i] * u[i] / (1.f + std::exp(-g[i]));
}

#ifdef BC_X86
BC_AVX2 void rms_rows_avx2(const float* x, const float* w, float* y, int64_t rows, int n,
                           float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256 a = _mm256_loadu_ps(xr + i), b = _mm256_loadu_ps(xr + i + 8);
      acc0 = _mm256_fmadd_ps(a, a, acc0);
      acc1 = _mm256_fmadd_ps(b, b, acc1);
    }
    float ss = hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) ss += xr[i] * xr[i];
    const float inv = 1.f / std::sqrt(ss / (float)n + eps);
    const __m256 iv = _mm256_set1_ps(inv);
    i = 0;
    for (; i + 8 <= n; i += 8) {
      __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xr + i), iv);
      if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
      _mm256_storeu_ps(yr + i, v);
    }
    for (; i < n; ++i) yr[i] = w ? (xr[i] * inv) * w[i] : xr[i] * inv;
  }
}

BC_AVX2 void silu_mul_avx2(const float* g, const float* u, float* y, int64_t lo, int64_t hi) {
  const __m256 one = _mm256_set1_ps(1.f), zero = _mm256_setzero_ps();
  int64_t i = lo;
  for (; i + 8 <= hi; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 e = exp8(_mm256_sub_ps(zero, gv));
    _mm256_storeu_ps(y + i, _mm256_div_ps(_mm256_mul_ps(gv, _mm256_loadu_ps(u + i)),
                                          _mm256_add_ps(one, e)));
  }
  silu_mul_scalar(g, u, y, i, hi);
}
#endif

}  // namespace

void rms_norm_run(const float* x, const float* w, float* y, int64_t rows, int n, float eps,
                  bool force_scalar) {
#ifdef BC_X86
  if (!force_scalar && cpu_has_avx2_fma()) {
    // Rows split over the kernel threads only when there are many (prefill).
    const int64_t per = 64;
    const int chunks = (int)((rows + per - 1) / per);
    parallel_chunks(chunks, rows * (int64_t)n, [&](int c) {
      const int64_t r0 = c * per;
      const int64_t r1 = std::min(rows, r0 + per);
      rms_rows_avx2(x + r0 * n, w, y + r0 * n, r1 - r0, n, eps);
    });
    return;
  }
#endif
  rms_rows_scalar(x, w, y, rows, n, eps);
}

void silu_mul_run(const float* g, const float* u, float* y, int64_t size, bool force_scalar) {
#ifdef BC_X86
  if (!force_scalar && cpu_has_avx2_fma()) {
    const int64_t per = 1 << 14;
    const int chunks = (int)((size + per - 1) / per);
    parallel_chunks(chunks, size * 8, [&](int c) {
      silu_mul_avx2(g, u, y, c * per, std::min(size, (c + 1) * per));
    });
    return;
  }
#endif
  silu_mul_scalar(g, u, y, 0, size);
}

}  // namespace bc_native
