// Logit soft-capping of attention scores (Gemma 2: cap * tanh(s / cap)), applied inside the
// attention kernels to a score before its mask. tanh(y) = 1 - 2 / (1 + exp(2y)) with the
// Cephes exp of simd.h: the portable loop and the AVX2 one give the same bits (fused
// multiply-adds in the same places), so a score's cap never depends on the path or lane.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "exp1.h"
#include "simd.h"

namespace bc_native {

// noinline: compiled for the default target wherever it is called from, so an AVX2
// caller's multiply-adds are never contracted into it (the same bits on every path).
__attribute__((noinline)) inline float softcap1(float s, float cap) {
  const float y = s / cap;
  return cap * (1.f - 2.f / (1.f + exp1_cephes(y + y)));
}

// Every finite score of s[0..n) capped (-inf, a masked key, stays).
inline void softcap_scalar(float* s, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i)
    if (s[i] != -INFINITY) s[i] = softcap1(s[i], cap);
}

#ifdef BC_X86
BC_AVX2 inline __m256 softcap8(__m256 s, __m256 cap) {
  const __m256 one = _mm256_set1_ps(1.f), two = _mm256_set1_ps(2.f);
  const __m256 y = _mm256_div_ps(s, cap);
  const __m256 e = exp8(_mm256_add_ps(y, y));
  return _mm256_mul_ps(cap, _mm256_sub_ps(one, _mm256_div_ps(two, _mm256_add_ps(one, e))));
}

// s[0..n) capped, n a multiple of 8, no -inf among them (scores before their mask).
BC_AVX2 inline void softcap_avx2(float* s, int64_t n, float cap) {
  const __m256 c = _mm256_set1_ps(cap);
  for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(s + i, softcap8(_mm256_loadu_ps(s + i), c));
}
#endif

// y = cap * tanh(x / cap) for every element (the final logit soft-capping of Gemma 2 / 4),
// softcap1's arithmetic on every path (the AVX2 loop's bits are the portable one's), so an
// element's value never depends on where it sits: a row's logits alone or in a batch. -inf
// gives -cap, as mx.tanh does.
void softcap_run(const float* x, float* y, int64_t size, float cap, bool force_scalar);

}  // namespace bc_native
