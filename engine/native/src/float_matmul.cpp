#include "float_matmul.h"

#include <algorithm>
#include <cmath>

#include "kernels.h"
#include "simd.h"

namespace bc_native {

namespace {

// Rows of x a block (its K floats stay in cache while a chunk's outputs pass over them)
// and outputs a chunk: the threads' jobs are (row block, output chunk) pairs.
constexpr int64_t kRowBlock = 32;
constexpr int64_t kOutChunk = 64;

// The reference order, one output at a time (the portable path).
float dot_scalar(const float* x, const float* w, int64_t K) {
  float l[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int64_t k0 = 0; k0 < K; k0 += 8)
    for (int j = 0; j < 8; ++j) {
      const int64_t k = k0 + j;
      l[j] = k < K ? std::fma(x[k], w[k], l[j]) : std::fma(0.f, 0.f, l[j]);
    }
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

void block_scalar(const float* x, const float* w, float* y, int64_t N, int64_t K,
                  int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  for (int64_t m = m0; m < m1; ++m)
    for (int64_t n = n0; n < n1; ++n) y[m * N + n] = dot_scalar(x + m * K, w + n * K, K);
}

#ifdef BC_X86
// R rows x C outputs (4 x 3: 12 accumulators, 3 weight vectors and one x vector fill the 16
// registers), each output its own 8-lane accumulator: the weight vector is loaded
// once for R rows and each x vector once for C outputs.
template <int R, int C>
BC_AVX2 inline void tile_avx2(const float* x, const float* w, float* y, int64_t N, int64_t K,
                              int64_t m, int64_t n, __m256i tail_mask, int64_t full) {
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k < full; k += 8) {
    __m256 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = _mm256_loadu_ps(w + (n + c) * K + k);
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + (m + r) * K + k);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  if (k < K) {  // masked lanes load 0: fma(0, 0, l), as the scalar order does
    __m256 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = _mm256_maskload_ps(w + (n + c) * K + k, tail_mask);
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_maskload_ps(x + (m + r) * K + k, tail_mask);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) y[(m + r) * N + n + c] = hsum(acc[r][c]);
}

template <int R>
BC_AVX2 void rows_avx2(const float* x, const float* w, float* y, int64_t N, int64_t K,
                       int64_t m, int64_t n0, int64_t n1, __m256i mask, int64_t full) {
  constexpr int C = R == 1 ? 4 : 3;
  int64_t n = n0;
  for (; n + C <= n1; n += C) tile_avx2<R, C>(x, w, y, N, K, m, n, mask, full);
  for (; n < n1; ++n) tile_avx2<R, 1>(x, w, y, N, K, m, n, mask, full);
}

BC_AVX2 void block_avx2(const float* x, const float* w, float* y, int64_t N, int64_t K,
                        int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t full = K / 8 * 8;
  alignas(32) int32_t lanes[8];
  for (int j = 0; j < 8; ++j) lanes[j] = full + j < K ? -1 : 0;
  const __m256i mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
  int64_t m = m0;
  for (; m + 4 <= m1; m += 4) rows_avx2<4>(x, w, y, N, K, m, n0, n1, mask, full);
  for (; m < m1; ++m) rows_avx2<1>(x, w, y, N, K, m, n0, n1, mask, full);
}
#endif

}  // namespace

void float_matmul_run(const float* x, const float* w, float* y, int64_t M, int64_t N,
                      int64_t K, bool force_scalar) {
  auto block = block_scalar;
#ifdef BC_X86
  if (!force_scalar && cpu_has_avx2_fma()) block = block_avx2;
#endif
  const int64_t row_blocks = (M + kRowBlock - 1) / kRowBlock;
  const int64_t out_chunks = (N + kOutChunk - 1) / kOutChunk;
  parallel_chunks((int)(row_blocks * out_chunks), (long)std::min<int64_t>(M * N * K, 1L << 40),
                  [&](int c) {
    const int64_t rb = c / out_chunks, oc = c % out_chunks;
    block(x, w, y, N, K, rb * kRowBlock, std::min(M, (rb + 1) * kRowBlock), oc * kOutChunk,
          std::min(N, (oc + 1) * kOutChunk));
  });
}

}  // namespace bc_native
