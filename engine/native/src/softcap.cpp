#include "softcap.h"

#include "kernels.h"

namespace bc_native {

namespace {

void softcap_rows_scalar(const float* x, float* y, int64_t lo, int64_t hi, float cap) {
  for (int64_t i = lo; i < hi; ++i) y[i] = softcap1(x[i], cap);
}

#ifdef BC_X86
BC_AVX2 void softcap_rows_avx2(const float* x, float* y, int64_t lo, int64_t hi, float cap) {
  const __m256 c = _mm256_set1_ps(cap);
  int64_t i = lo;
  for (; i + 8 <= hi; i += 8) _mm256_storeu_ps(y + i, softcap8(_mm256_loadu_ps(x + i), c));
  softcap_rows_scalar(x, y, i, hi, cap);
}
#endif

}  // namespace

void softcap_run(const float* x, float* y, int64_t size, float cap, bool force_scalar) {
#ifdef BC_X86
  if (!force_scalar && cpu_has_avx2_fma()) {
    const int64_t per = 1 << 14;  // a multiple of 8: an element's path is its lane's
    const int chunks = (int)((size + per - 1) / per);
    parallel_chunks(chunks, size * 8, [&](int c) {
      softcap_rows_avx2(x, y, c * per, std::min(size, (c + 1) * per), cap);
    });
    return;
  }
#endif
  softcap_rows_scalar(x, y, 0, size, cap);
}

}  // namespace bc_native
