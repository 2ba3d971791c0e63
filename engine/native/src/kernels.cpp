// CPU kernels for y = x @ dequant(W).T on MLX's affine-quantized layout:
// w[n, k] = scale[n, k / gs] * q[n, k] + bias[n, k / gs], q packed little-end first
// into uint32 words along k (8 values a word at 4 bits, 4 at 8 bits).
//
// Each weight is dequantized once per output row and reused for up to 8 rows of x,
// so small batches cost about one weight pass. Rows of W are split over a few
// persistent threads (the MLX stream thread takes the first share).

#include "kernels.h"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "simd.h"

namespace bc_native {
namespace {

// The M tiles of the kernels: 8 rows at a time, then 4, 2 and 1 for the rest. A row's
// result never depends on its tile (each row has its own accumulators).
inline int tile_rows(int M, int m0) {
  const int left = M - m0;
  return left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
}

inline float f16_to_f32(uint16_t h) {
  // Portable IEEE half -> float (subnormals, inf and NaN included).
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: value = man * 2^-24
      float f = (float)man * 5.9604644775390625e-8f;
      std::memcpy(&bits, &f, 4);
      bits |= sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

}  // namespace

float load_scale(const void* p, size_t i, ScaleType t) {
  switch (t) {
    case ScaleType::f32:
      return static_cast<const float*>(p)[i];
    case ScaleType::f16:
      return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default:
      return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
  }
}

namespace {

// ---------------------------------------------------------------- scalar ----

template <int BITS>
void rows_scalar(const QmvArgs& a, int n0, int n1) {
  constexpr int per_word = 32 / BITS;
  constexpr uint32_t mask = (1u << BITS) - 1;
  const int K = a.K, gs = a.group_size, groups = K / gs, words = K / per_word;
  std::vector<float> wrow(K);
  for (int n = n0; n < n1; ++n) {
    const uint32_t* wp = a.w + (size_t)n * words;
    for (int g = 0; g < groups; ++g) {
      float s = load_scale(a.scales, (size_t)n * groups + g, a.stype);
      float b = load_scale(a.biases, (size_t)n * groups + g, a.stype);
      for (int k = g * gs; k < (g + 1) * gs; ++k) {
        uint32_t q = (wp[k / per_word] >> ((k % per_word) * BITS)) & mask;
        wrow[k] = s * (float)q + b;
      }
    }
    for (int m = 0; m < a.M; ++m) {
      const float* xr = a.x + (size_t)m * K;
      float acc = 0.f;
      for (int k = 0; k < K; ++k) acc += wrow[k] * xr[k];
      a.y[(size_t)m * a.N + n] = acc;
    }
  }
}

template <int BITS>
void deq_rows_scalar(const QmvArgs& a, int n0, int n1) {
  constexpr int per_word = 32 / BITS;
  constexpr uint32_t mask = (1u << BITS) - 1;
  const int K = a.K, gs = a.group_size, groups = K / gs, words = K / per_word;
  for (int n = n0; n < n1; ++n) {
    const uint32_t* wp = a.w + (size_t)n * words;
    for (int k = 0; k < K; ++k) {
      float s = load_scale(a.scales, (size_t)n * groups + k / gs, a.stype);
      float b = load_scale(a.biases, (size_t)n * groups + k / gs, a.stype);
      uint32_t q = (wp[k / per_word] >> ((k % per_word) * BITS)) & mask;
      a.y[(size_t)n * K + k] = s * (float)q + b;
    }
  }
}

// int8 activations, portable: the same integer sums per 32-block as the AVX2 kernel.
template <int BITS>
void rows_i8_scalar(const QmvArgs& a, int n0, int n1) {
  constexpr int per_word = 32 / BITS;
  constexpr uint32_t mask = (1u << BITS) - 1;
  const int K = a.K, gs = a.group_size, groups = K / gs, words = K / per_word;
  const int blocks = K / 32;
  for (int n = n0; n < n1; ++n) {
    const uint32_t* wp = a.w + (size_t)n * words;
    for (int m = 0; m < a.M; ++m) {
      const int8_t* xq = a.xq + (size_t)m * K;
      float acc = 0.f;
      for (int b = 0; b < blocks; ++b) {
        const int g = b * 32 / gs;
        int32_t dot = 0;
        for (int i = 0; i < 32; ++i) {
          // 4-bit: x is in even/odd order within the block (see quantize_x_int8)
          const int k = b * 32 + (BITS == 4 ? (i < 16 ? 2 * i : 2 * (i - 16) + 1) : i);
          const int32_t q = (int32_t)((wp[k / per_word] >> ((k % per_word) * BITS)) & mask);
          dot += q * xq[b * 32 + i];
        }
        acc += load_scale(a.scales, (size_t)n * groups + g, a.stype) *
               a.xd[(size_t)m * blocks + b] * (float)dot;
      }
      for (int g = 0; g < groups; ++g)
        acc += load_scale(a.biases, (size_t)n * groups + g, a.stype) * a.xs[(size_t)m * groups + g];
      a.y[(size_t)m * a.N + n] = acc;
    }
  }
}

// ------------------------------------------------------------------ AVX2 ----
#ifdef BC_X86

// Eight quantized values as floats: the j-th 8-wide chunk of a group starting at word p.
template <int BITS>
BC_AVX2 inline __m256 unpack8(const uint32_t* p, int j) {
  if constexpr (BITS == 4) {
    // One word holds the 8 values: broadcast it and shift each lane by 4 * lane.
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    __m256i v = _mm256_srlv_epi32(_mm256_set1_epi32((int)p[j]), shifts);
    return _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(0xf)));
  } else {
    // Two words hold 8 bytes, already in element order.
    __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 2 * j));
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
  }
}

// Row n's scales and biases as floats (F16C converts 8 halves an instruction; the portable
// half conversion per group cost as much as the group's 32 multiply-adds).
BC_AVX2 void row_scales(const QmvArgs& a, int n, int groups, float* sf, float* bf) {
  const size_t off = (size_t)n * groups;
  if (a.stype == ScaleType::f32) {
    std::memcpy(sf, static_cast<const float*>(a.scales) + off, groups * sizeof(float));
    std::memcpy(bf, static_cast<const float*>(a.biases) + off, groups * sizeof(float));
    return;
  }
  const uint16_t* sp = static_cast<const uint16_t*>(a.scales) + off;
  const uint16_t* bp = static_cast<const uint16_t*>(a.biases) + off;
  int g = 0;
  for (; g + 8 <= groups; g += 8) {
    __m128i sh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sp + g));
    __m128i bh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bp + g));
    if (a.stype == ScaleType::f16) {
      _mm256_storeu_ps(sf + g, _mm256_cvtph_ps(sh));
      _mm256_storeu_ps(bf + g, _mm256_cvtph_ps(bh));
    } else {  // bfloat16: the top half of a float
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(sf + g),
                          _mm256_slli_epi32(_mm256_cvtepu16_epi32(sh), 16));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(bf + g),
                          _mm256_slli_epi32(_mm256_cvtepu16_epi32(bh), 16));
    }
  }
  for (; g < groups; ++g) {  // the tail (K = 576: 18 groups) without a libm-style loop
    if (a.stype == ScaleType::f16) {
      sf[g] = _cvtsh_ss(sp[g]);
      bf[g] = _cvtsh_ss(bp[g]);
    } else {
      sf[g] = bf16_to_f32(sp[g]);
      bf[g] = bf16_to_f32(bp[g]);
    }
  }
}

// 8-bit: y[m0 .. m0 + R) x [n0, n1), each weight dequantized once (one FMA) and used for
// R rows. (The same scheme for 4-bit was 20-35 % slower than tile4_avx2.) With R <= 4 two accumulators a row hide the FMA latency.
template <int BITS, int GS, int R>
BC_AVX2 void tile_avx2(const QmvArgs& a, int n0, int n1, int m0, float* sf, float* bf) {
  constexpr int per_word = 32 / BITS;
  constexpr int NA = R <= 4 ? 2 : 1;
  constexpr int chunks = GS / 8;
  constexpr int gwords = GS / per_word;
  const int K = a.K, groups = K / GS, words = K / per_word;
  const float* x = a.x + (size_t)m0 * K;
  for (int n = n0; n < n1; ++n) {
    const uint32_t* wp = a.w + (size_t)n * words;
    row_scales(a, n, groups, sf, bf);
    __m256 acc[R][NA];
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < NA; ++i) acc[r][i] = _mm256_setzero_ps();
    for (int g = 0; g < groups; ++g) {
      __m256 s = _mm256_set1_ps(sf[g]);
      __m256 b = _mm256_set1_ps(bf[g]);
      const uint32_t* gp = wp + (size_t)g * gwords;
      const float* xg = x + (size_t)g * GS;
      for (int j = 0; j < chunks; ++j) {
        __m256 w = _mm256_fmadd_ps(unpack8<BITS>(gp, j), s, b);
        for (int r = 0; r < R; ++r) {
          __m256 xv = _mm256_loadu_ps(xg + (size_t)r * K + 8 * j);
          acc[r][j % NA] = _mm256_fmadd_ps(w, xv, acc[r][j % NA]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      __m256 t = acc[r][0];
      if constexpr (NA == 2) t = _mm256_add_ps(t, acc[r][1]);
      a.y[(size_t)(m0 + r) * a.N + n] = hsum(t);
    }
  }
}

// 4-bit: 16 bytes hold a 32-block; their low nibbles are the even elements, the high
// nibbles the odd ones, so x is pre-permuted (a.xp) and each nibble vector is widened
// straight to floats. Sums stay per group: y = sum_g s_g * sum(q x) + b_g * sum(x), which
// saves the per-weight dequantizing FMA.
template <int GS, int R>
BC_AVX2 void tile4_avx2(const QmvArgs& a, int n0, int n1, int m0, float* sf, float* bf) {
  constexpr int NT = R <= 2 ? 2 : 1;  // independent totals per row
  const int K = a.K, groups = K / GS, words = K / 8;
  const __m128i low = _mm_set1_epi8(0x0f);
  const float* xp = a.xp + (size_t)m0 * K;
  const float* xs = a.xs + (size_t)m0 * groups;
  for (int n = n0; n < n1; ++n) {
    const uint32_t* wp = a.w + (size_t)n * words;
    row_scales(a, n, groups, sf, bf);
    __m256 tot[R][NT];
    float bsum[R];
    for (int r = 0; r < R; ++r) {
      bsum[r] = 0.f;
      for (int i = 0; i < NT; ++i) tot[r][i] = _mm256_setzero_ps();
    }
    for (int g = 0; g < groups; ++g) {
      __m256 acc[R][2];
      for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
      for (int blk = 0; blk < GS / 32; ++blk) {
        const int k0 = g * GS + blk * 32;
        __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wp + k0 / 8));
        __m128i lo = _mm_and_si128(v, low);
        __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), low);
        __m256 q0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
        __m256 q1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
        __m256 q2 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
        __m256 q3 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
        for (int r = 0; r < R; ++r) {
          const float* x = xp + (size_t)r * K + k0;
          acc[r][0] = _mm256_fmadd_ps(q0, _mm256_loadu_ps(x), acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(q1, _mm256_loadu_ps(x + 8), acc[r][1]);
          acc[r][0] = _mm256_fmadd_ps(q2, _mm256_loadu_ps(x + 16), acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(q3, _mm256_loadu_ps(x + 24), acc[r][1]);
        }
      }
      __m256 s = _mm256_set1_ps(sf[g]);
      for (int r = 0; r < R; ++r) {
        tot[r][g % NT] = _mm256_fmadd_ps(s, _mm256_add_ps(acc[r][0], acc[r][1]), tot[r][g % NT]);
        bsum[r] += bf[g] * xs[(size_t)r * groups + g];
      }
    }
    for (int r = 0; r < R; ++r) {
      __m256 t = tot[r][0];
      if constexpr (NT == 2) t = _mm256_add_ps(t, tot[r][1]);
      a.y[(size_t)(m0 + r) * a.N + n] = hsum(t) + bsum[r];
    }
  }
}

// int8 activations: per 32-block, sum(q * qx) is an exact integer dot product
// (maddubs: unsigned weight bytes x signed x bytes, pairs summed into int16, then pairs
// into int32), scaled once by the block's x step and the group's scale. 4-bit: the
// nibble vector [low 16 | high 16] meets x in the same even/odd order. 8-bit: a byte q
// up to 255 times 127 would overflow maddubs' int16 pairs, so q = 16 hi + lo is split.
// The integer sum of one 32-block: weights (32 unsigned bytes, in x's order) times x.
template <int BITS>
BC_AVX2 inline __m256i block_dot(const uint32_t* wp, int k0, const int8_t* xq) {
  const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k0));
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (BITS == 4) {
    const __m128i low4 = _mm_set1_epi8(0x0f);
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wp + k0 / 8));
    const __m256i wq = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low4),
                                        _mm_and_si128(v, low4));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(wq, xv), ones);
  } else {
    const __m256i low8 = _mm256_set1_epi8(0x0f);
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + k0 / 4));
    const __m256i lo = _mm256_and_si256(v, low8);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low8);
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, xv), ones),
                            _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xv),
                                              _mm256_set1_epi16(16)));
  }
}

// int8 activations: per 32-block, sum(q * qx) is an exact integer dot product
// (maddubs: unsigned weight bytes x signed x bytes, pairs summed into int16, then pairs
// into int32), scaled once by the block's x step and the group's scale. 4-bit: the
// nibble vector [low 16 | high 16] meets x in the same even/odd order. 8-bit: a byte q
// up to 255 times 127 would overflow maddubs' int16 pairs, so q = 16 hi + lo is split.
// Blocks go in pairs into two named accumulators: an accumulator array indexed by a
// run-time block number was kept in memory, not registers (3x slower at one row).
// A row's scale or bias i as a float, and 8 of them from i on: read in place (a row's
// copy into a float buffer, as the float kernels make, cost as much as a one-row product's
// blocks at K = 576).
BC_AVX2 inline float scale_at(ScaleType t, const void* p, size_t i) {
  if (t == ScaleType::f32) return static_cast<const float*>(p)[i];
  const uint16_t h = static_cast<const uint16_t*>(p)[i];
  return t == ScaleType::f16 ? _cvtsh_ss(h) : bf16_to_f32(h);
}

BC_AVX2 inline __m256 scales8_at(ScaleType t, const void* p, size_t i) {
  if (t == ScaleType::f32) return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  const __m128i h =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
  if (t == ScaleType::f16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// int8 activations: per 32-block, sum(q * qx) is an exact integer dot product
// (maddubs: unsigned weight bytes x signed x bytes, pairs summed into int16, then pairs
// into int32), scaled once by the block's x step and the group's scale. 4-bit: the
// nibble vector [low 16 | high 16] meets x in the same even/odd order. 8-bit: a byte q
// up to 255 times 127 would overflow maddubs' int16 pairs, so q = 16 hi + lo is split.
// Blocks go in pairs into two named accumulators: an accumulator array indexed by a
// run-time block number was kept in memory, not registers (3x slower at one row).
// The end of one int8 output: even- and odd-block accumulators added, then the bias term
// sum_g bias_g * sum(x'_g), 8 groups at a time (a scalar loop was a chain of dependent
// multiply-adds as long as the row's block work).
BC_AVX2 inline float i8_finish(__m256 acc0, __m256 acc1, ScaleType st, const void* biases,
                               size_t off, const float* xr, int groups) {
  __m256 t = _mm256_add_ps(acc0, acc1);
  int g = 0;
  for (; g + 8 <= groups; g += 8)
    t = _mm256_fmadd_ps(scales8_at(st, biases, off + g), _mm256_loadu_ps(xr + g), t);
  float bsum = 0.f;
  for (; g < groups; ++g)  // one rounding each, as an intrinsic (std::fma called libm)
    bsum = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(scale_at(st, biases, off + g)),
                                      _mm_set_ss(xr[g]), _mm_set_ss(bsum)));
  return hsum(t) + bsum;
}

template <int BITS, int GS, int R>
BC_AVX2 void tile_i8_avx2(const QmvArgs& a, int n0, int n1, int m0, float*, float*) {
  constexpr int per_word = 32 / BITS;
  constexpr int bpg = GS / 32;  // blocks a group
  const int K = a.K, groups = K / GS, words = K / per_word, blocks = K / 32;
  const int8_t* xq = a.xq + (size_t)m0 * K;
  const float* xd = a.xd + (size_t)m0 * blocks;
  const float* xs = a.xs + (size_t)m0 * groups;
  const ScaleType st = a.stype;
  for (int n = n0; n < n1; ++n) {
    const uint32_t* wp = a.w + (size_t)n * words;
    const size_t off = (size_t)n * groups;  // this row's scales and biases
    __m256 acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    int b = 0;
    for (; b + 2 <= blocks; b += 2) {
      const float s0 = scale_at(st, a.scales, off + b / bpg);
      const float s1 = scale_at(st, a.scales, off + (b + 1) / bpg);
      for (int r = 0; r < R; ++r) {
        const int8_t* x = xq + (size_t)r * K;
        const float* d = xd + (size_t)r * blocks;
        acc0[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<BITS>(wp, b * 32, x)),
                                  _mm256_set1_ps(s0 * d[b]), acc0[r]);
        acc1[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<BITS>(wp, b * 32 + 32, x)),
                                  _mm256_set1_ps(s1 * d[b + 1]), acc1[r]);
      }
    }
    if (b < blocks) {
      const float s0 = scale_at(st, a.scales, off + b / bpg);
      for (int r = 0; r < R; ++r)
        acc0[r] = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(block_dot<BITS>(wp, b * 32, xq + (size_t)r * K)),
            _mm256_set1_ps(s0 * xd[(size_t)r * blocks + b]), acc0[r]);
    }
    for (int r = 0; r < R; ++r)
      a.y[(size_t)(m0 + r) * a.N + n] =
          i8_finish(acc0[r], acc1[r], st, a.biases, off, xs + (size_t)r * groups, groups);
  }
}

template <int BITS, int GS>
struct TileI8 {
  template <int R>
  BC_AVX2 static void run(const QmvArgs& a, int n0, int n1, int m0, float* sf, float* bf) {
    tile_i8_avx2<BITS, GS, R>(a, n0, n1, m0, sf, bf);
  }
};

// The CPU features of the packed kernel's AVX-512 path (src/packed.cpp).
bool detect_avx512_vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512vnni");
}

// The M-tile kernels as types, so one blocking loop serves both layouts.
template <int GS>
struct Tile4 {
  template <int R>
  BC_AVX2 static void run(const QmvArgs& a, int n0, int n1, int m0, float* sf, float* bf) {
    tile4_avx2<GS, R>(a, n0, n1, m0, sf, bf);
  }
};

template <int BITS, int GS>
struct TileQ {
  template <int R>
  BC_AVX2 static void run(const QmvArgs& a, int n0, int n1, int m0, float* sf, float* bf) {
    tile_avx2<BITS, GS, R>(a, n0, n1, m0, sf, bf);
  }
};

// Rows of W in blocks small enough that one block stays in L1 across all M tiles.
template <int GS, class Tile>
BC_AVX2 void rows_avx2(const QmvArgs& a, int n0, int n1) {
  constexpr int block = 16;
  thread_local std::vector<float> buf;
  const int groups = a.K / GS;
  if ((int)buf.size() < 2 * groups + 16) buf.resize(2 * groups + 16);
  float *sf = buf.data(), *bf = buf.data() + groups + 8;
  for (int nb = n0; nb < n1; nb += block) {
    int ne = std::min(n1, nb + block);
    for (int m = 0; m < a.M; m += tile_rows(a.M, m)) {
      switch (tile_rows(a.M, m)) {
        case 8: Tile::template run<8>(a, nb, ne, m, sf, bf); break;
        case 4: Tile::template run<4>(a, nb, ne, m, sf, bf); break;
        case 2: Tile::template run<2>(a, nb, ne, m, sf, bf); break;
        default: Tile::template run<1>(a, nb, ne, m, sf, bf);
      }
    }
  }
}

// Dequantize rows [n0, n1) of W into y (N, K) float32.
template <int BITS, int GS>
BC_AVX2 void deq_rows_avx2(const QmvArgs& a, int n0, int n1) {
  constexpr int per_word = 32 / BITS;
  constexpr int gwords = GS / per_word;
  thread_local std::vector<float> buf;
  const int K = a.K, groups = K / GS, words = K / per_word;
  if ((int)buf.size() < 2 * groups + 16) buf.resize(2 * groups + 16);
  float *sf = buf.data(), *bf = buf.data() + groups + 8;
  for (int n = n0; n < n1; ++n) {
    row_scales(a, n, groups, sf, bf);
    const uint32_t* wp = a.w + (size_t)n * words;
    float* out = a.y + (size_t)n * K;
    for (int g = 0; g < groups; ++g) {
      __m256 sv = _mm256_set1_ps(sf[g]), bv = _mm256_set1_ps(bf[g]);
      for (int j = 0; j < GS / 8; ++j)
        _mm256_storeu_ps(out + g * GS + 8 * j,
                         _mm256_fmadd_ps(unpack8<BITS>(wp + (size_t)g * gwords, j), sv, bv));
    }
  }
}

bool detect_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
}
#else
bool detect_avx2() { return false; }
bool detect_avx512_vnni() { return false; }
#endif

using RowsFn = void (*)(const QmvArgs&, int, int);

RowsFn pick_deq(const QmvArgs& a, bool force_scalar) {
#ifdef BC_X86
  if (!force_scalar && cpu_has_avx2_fma()) {
    if (a.bits == 4 && a.group_size == 32) return deq_rows_avx2<4, 32>;
    if (a.bits == 4 && a.group_size == 64) return deq_rows_avx2<4, 64>;
    if (a.bits == 8 && a.group_size == 32) return deq_rows_avx2<8, 32>;
    if (a.bits == 8 && a.group_size == 64) return deq_rows_avx2<8, 64>;
  }
#endif
  return a.bits == 4 ? deq_rows_scalar<4> : deq_rows_scalar<8>;
}

// AVX-512 VNNI for the packed kernel unless BATCHCHAT_NATIVE_AVX512=0 (tests compare).
bool use_avx512_vnni() {
  static const bool has = detect_avx512_vnni();
  const char* env = std::getenv("BATCHCHAT_NATIVE_AVX512");
  return has && !(env && env[0] == '0');
}

RowsFn pick_i8(const QmvArgs& a, bool force_scalar) {
#ifdef BC_X86
  if (!force_scalar && cpu_has_avx2_fma()) {
    if (a.bits == 4 && a.group_size == 32) return rows_avx2<32, TileI8<4, 32>>;
    if (a.bits == 4 && a.group_size == 64) return rows_avx2<64, TileI8<4, 64>>;
    if (a.bits == 8 && a.group_size == 32) return rows_avx2<32, TileI8<8, 32>>;
    if (a.bits == 8 && a.group_size == 64) return rows_avx2<64, TileI8<8, 64>>;
  }
#endif
  return a.bits == 4 ? rows_i8_scalar<4> : rows_i8_scalar<8>;
}

RowsFn pick(const QmvArgs& a, bool force_scalar) {
#ifdef BC_X86
  if (!force_scalar && cpu_has_avx2_fma()) {
    if (a.bits == 4 && a.xp && a.group_size == 32) return rows_avx2<32, Tile4<32>>;
    if (a.bits == 4 && a.xp && a.group_size == 64) return rows_avx2<64, Tile4<64>>;
    if (a.bits == 8 && a.group_size == 32) return rows_avx2<32, TileQ<8, 32>>;
    if (a.bits == 8 && a.group_size == 64) return rows_avx2<64, TileQ<8, 64>>;
  }
#endif
  return a.bits == 4 ? rows_scalar<4> : rows_scalar<8>;
}

// ------------------------------------------------------------ thread pool ----
// A decode step issues ~200 small calls back to back and a condition-variable wake-up
// costs as much as a small matvec, so workers poll briefly (yielding the core) before
// sleeping. The 2-core dev machine is often oversubscribed, so nobody waits for a
// particular thread: the rows are cut into chunks that any participant (the caller
// included) takes from a counter; a worker that is not scheduled in time simply gets none. A job owns everything it uses,
// so a late worker can still look at a finished job safely.

struct Job {
  std::function<void(int)> chunk;  // does chunk c of `chunks`
  int chunks;
  std::atomic<int> next{0}, done{0};

  void work() {
    for (int c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
      chunk(c);
      done.fetch_add(1, std::memory_order_release);
    }
  }
};

// A short spin, then yields: on 2 cores a helper spinning for ~0.1 ms (the first policy)
// took the core from the thread building and dispatching the next ops; measured in one
// process, solo decode step 28.7 -> 24.9 ms, 16 rows 122.6 -> 108.9 ms (docs/kernels.md).
std::atomic<int> wait_spins{50}, wait_yields{2000};

inline void spin_pause() {
#ifdef BC_X86
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

class Pool {
 public:
  explicit Pool(int helpers) {
    for (int i = 0; i < helpers; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      gen_.fetch_add(1);
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int size() const { return (int)threads_.size() + 1; }

  void run(const std::shared_ptr<Job>& job) {
    std::lock_guard<std::mutex> call(call_mu_);  // one job at a time
    {
      std::lock_guard<std::mutex> lk(mu_);
      current_ = job;
      gen_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    job->work();
    for (int i = 0; job->done.load(std::memory_order_acquire) < job->chunks; ++i) {
      if (i < 2000) spin_pause();
      else std::this_thread::yield();  // a preempted worker holds a chunk: let it run
    }
  }

 private:
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      // Wait for the next job: spin, then yield the core, then sleep (set_qmv_wait).
      const int spins = wait_spins.load(std::memory_order_relaxed);
      const int yields = wait_yields.load(std::memory_order_relaxed);
      for (int i = 0; i < spins && gen_.load(std::memory_order_acquire) == seen; ++i)
        spin_pause();
      for (int i = 0; i < yields && gen_.load(std::memory_order_acquire) == seen; ++i)
        std::this_thread::yield();
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return gen_.load() != seen; });
        seen = gen_.load();
        if (stop_) return;
        job = current_;
      }
      if (job) job->work();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mu_, call_mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> gen_{0};
  std::shared_ptr<Job> current_;
  bool stop_ = false;
};

int default_threads() {
  if (const char* e = std::getenv("BATCHCHAT_QMV_THREADS")) {
    int n = std::atoi(e);
    if (n > 0) return std::min(n, 64);
  }
  int hw = (int)std::thread::hardware_concurrency();
  return std::clamp(hw, 1, 8);
}

std::mutex pool_mu;
std::unique_ptr<Pool> pool;
int wanted_threads = 0;

Pool* get_pool() {
  std::lock_guard<std::mutex> lk(pool_mu);
  if (wanted_threads == 0) wanted_threads = default_threads();
  if (wanted_threads <= 1) return nullptr;
  if (!pool || pool->size() != wanted_threads) {
    pool.reset();
    pool = std::make_unique<Pool>(wanted_threads - 1);
  }
  return pool.get();
}

// Below this many multiply-adds a second thread costs more than it saves.
constexpr long kParallelMin = 1L << 17;

}  // namespace

bool cpu_has_avx2_fma() {
  static const bool ok = detect_avx2();
  return ok;
}

int qmv_threads() {
  std::lock_guard<std::mutex> lk(pool_mu);
  if (wanted_threads == 0) wanted_threads = default_threads();
  return wanted_threads;
}

void set_qmv_wait(int spins, int yields) {
  wait_spins.store(std::max(0, spins));
  wait_yields.store(std::max(0, yields));
}

void set_qmv_threads(int n) {
  std::lock_guard<std::mutex> lk(pool_mu);
  wanted_threads = std::max(1, n);
}

void parallel_chunks(int chunks, long work, const std::function<void(int)>& fn) {
  Pool* p = work >= kParallelMin && chunks > 1 ? get_pool() : nullptr;
  if (!p) {
    for (int c = 0; c < chunks; ++c) fn(c);
    return;
  }
  auto job = std::make_shared<Job>();
  job->chunk = fn;
  job->chunks = chunks;
  p->run(job);
}

// Rows of one or more matrices sharing x, cut into chunks that the threads take: about 4
// chunks a thread, whole multiples of 8 rows.
static void run_parts(const std::vector<QmvArgs>& parts, RowsFn fn, long work) {
  int total = 0;
  for (const auto& p : parts) total += p.N;
  if (work < kParallelMin || total < 32 || !get_pool()) {
    for (const auto& p : parts) fn(p, 0, p.N);
    return;
  }
  const int threads = qmv_threads();
  const int per = (total + 4 * threads - 1) / (4 * threads);
  const int rows = std::max(8, (per + 7) & ~7);
  std::vector<std::pair<int, int>> chunks;  // (part, first row)
  for (int i = 0; i < (int)parts.size(); ++i)
    for (int lo = 0; lo < parts[i].N; lo += rows) chunks.emplace_back(i, lo);
  parallel_chunks((int)chunks.size(), work, [&](int c) {
    const auto [i, lo] = chunks[c];
    fn(parts[i], lo, std::min(parts[i].N, lo + rows));
  });
}

static void run_rows(const QmvArgs& a, RowsFn fn, long work) { run_parts({a}, fn, work); }

void quantize_x_int8(const float* x, int M, int K, int bits, int8_t* q, float* d) {
  const int blocks = K / 32;
  for (int m = 0; m < M; ++m) {
    for (int b = 0; b < blocks; ++b) {
      const float* xb = x + (size_t)m * K + b * 32;
      float amax = 0.f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float step = amax / 127.f;
      const float inv = amax > 0.f ? 127.f / amax : 0.f;
      d[(size_t)m * blocks + b] = step;
      int8_t* qb = q + (size_t)m * K + b * 32;
      for (int i = 0; i < 32; ++i) {
        // 4-bit weights unpack as the block's even elements, then its odd ones
        const int src = bits == 4 ? (i < 16 ? 2 * i : 2 * (i - 16) + 1) : i;
        qb[i] = (int8_t)std::lrintf(xb[src] * inv);
      }
    }
  }
}

namespace {

#ifdef BC_X86
// quantize_x_int8 for rows [m0, m1), 8 floats a vector: the same max, step, products and
// round-to-nearest-even conversion, so the same bytes (checked against it in the tests).
BC_AVX2 void quantize_rows_avx2(const float* x, int m0, int m1, int K, int bits, int8_t* q,
                                float* d) {
  const int blocks = K / 32;
  const __m256 sign = _mm256_set1_ps(-0.f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int m = m0; m < m1; ++m)
    for (int b = 0; b < blocks; ++b) {
      const float* xb = x + (size_t)m * K + b * 32;
      __m256 v[4];
      for (int j = 0; j < 4; ++j) v[j] = _mm256_loadu_ps(xb + 8 * j);
      if (bits == 4) {  // even elements, then odd: shuffles within lanes, then lane order
        const __m256 e0 = _mm256_shuffle_ps(v[0], v[1], 0x88), o0 = _mm256_shuffle_ps(v[0], v[1], 0xDD);
        const __m256 e1 = _mm256_shuffle_ps(v[2], v[3], 0x88), o1 = _mm256_shuffle_ps(v[2], v[3], 0xDD);
        v[0] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e0), 0xD8));
        v[1] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e1), 0xD8));
        v[2] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o0), 0xD8));
        v[3] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o1), 0xD8));
      }
      __m256 mx = _mm256_andnot_ps(sign, v[0]);
      for (int j = 1; j < 4; ++j) mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[j]));
      const float amax = hmax(mx);
      d[(size_t)m * blocks + b] = amax / 127.f;
      const __m256 inv = _mm256_set1_ps(amax > 0.f ? 127.f / amax : 0.f);
      __m256i iv[4];
      for (int j = 0; j < 4; ++j) iv[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], inv));
      const __m256i p16 = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]),
                                             _mm256_packs_epi32(iv[2], iv[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + (size_t)m * K + b * 32),
                          _mm256_permutevar8x32_epi32(p16, order));
    }
}
#endif

// What the int8 kernels read besides x's bytes, for rows [m0, m1): the rounded x summed
// per group times its step (xs, for the bias term).
void prepare_i8_rows(const QmvArgs& a, int m0, int m1, bool simd, int8_t* xq, float* xd,
                     float* xs) {
  const int K = a.K, blocks = K / 32, groups = K / a.group_size;
#ifdef BC_X86
  if (simd) quantize_rows_avx2(a.x, m0, m1, K, a.bits, xq, xd);
  else
#endif
    quantize_x_int8(a.x + (size_t)m0 * K, m1 - m0, K, a.bits, xq + (size_t)m0 * K,
                    xd + (size_t)m0 * blocks);
  for (int m = m0; m < m1; ++m) {
    // The bias term uses the rounded x too: the error is then sum w * (x' - x), where with
    // the exact sum it would be sum (w - bias) * (x' - x), and |w - bias| > |w| (bias is
    // about the group's minimum).
    float* xsm = xs + (size_t)m * groups;
    std::fill(xsm, xsm + groups, 0.f);
    for (int b = 0; b < blocks; ++b) {
      const int8_t* qb = xq + (size_t)m * K + b * 32;
      if (a.group_size == 16) {  // a block holds two groups
        for (int h = 0; h < 2; ++h) {
          int32_t sum = 0;
          for (int i = 16 * h; i < 16 * h + 16; ++i) sum += qb[i];
          xsm[2 * b + h] += xd[(size_t)m * blocks + b] * (float)sum;
        }
        continue;
      }
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) sum += qb[i];
      xsm[b * 32 / a.group_size] += xd[(size_t)m * blocks + b] * (float)sum;
    }
  }
}

}  // namespace

void quantize_rows_int8(const float* x, int M, int K, int group_size, bool force_scalar,
                        int8_t* q, float* d, float* xs) {
  QmvArgs a{};
  a.x = x;
  a.M = M;
  a.K = K;
  a.group_size = group_size;
  a.bits = 8;  // x in its own order
  const bool simd = !force_scalar && cpu_has_avx2_fma();
  const int per = 16, chunks = (M + per - 1) / per;
  parallel_chunks(chunks, (long)M * K * 8, [&](int c) {
    prepare_i8_rows(a, c * per, std::min(M, (c + 1) * per), simd, q, d, xs);
  });
}

bool avx512_vnni_enabled() { return use_avx512_vnni(); }

void qmv_run_many(const std::vector<QmvArgs>& args, bool force_scalar, bool int8_x) {
  if (args.empty()) return;
  std::vector<QmvArgs> parts = args;
  const QmvArgs& a = parts[0];
  const int groups = a.K / a.group_size;
  long work = 0;
  for (const auto& p : parts) work += (long)p.M * p.N * p.K;
  // Scratch reused across calls (a decode step makes ~100): no allocation per call.
  thread_local std::vector<int8_t> xq;
  thread_local std::vector<float> xd, xp, xs;
  RowsFn fn;
  if (int8_x && a.K % 32 == 0) {
    const int blocks = a.K / 32;
    const bool simd = !force_scalar && cpu_has_avx2_fma();
    xq.resize((size_t)a.M * a.K);
    xd.resize((size_t)a.M * blocks);
    xs.resize((size_t)a.M * groups);
    // Rows are prepared independently (so in any split): in parallel for a prompt chunk.
    const int per = 16, chunks = (a.M + per - 1) / per;
    int8_t* q = xq.data();
    float *d = xd.data(), *sm = xs.data();
    parallel_chunks(chunks, (long)a.M * a.K * 8, [&](int c) {
      prepare_i8_rows(a, c * per, std::min(a.M, (c + 1) * per), simd, q, d, sm);
    });
    for (auto& p : parts) p.xq = q, p.xd = d, p.xs = sm;
    fn = pick_i8(parts[0], force_scalar);
  } else {
    if (a.bits == 4 && !force_scalar && cpu_has_avx2_fma()) {
      // Even/odd split of every 32-block of x, and x's sum per group (see tile4_avx2).
      xp.resize((size_t)a.M * a.K);
      xs.assign((size_t)a.M * groups, 0.f);
      for (int m = 0; m < a.M; ++m) {
        const float* x = a.x + (size_t)m * a.K;
        float* p = xp.data() + (size_t)m * a.K;
        for (int k0 = 0; k0 < a.K; k0 += 32)
          for (int i = 0; i < 16; ++i) {
            p[k0 + i] = x[k0 + 2 * i];
            p[k0 + 16 + i] = x[k0 + 2 * i + 1];
          }
        for (int k = 0; k < a.K; ++k) xs[(size_t)m * groups + k / a.group_size] += x[k];
      }
      for (auto& p : parts) p.xp = xp.data(), p.xs = xs.data();
    }
    fn = pick(parts[0], force_scalar);
  }
  run_parts(parts, fn, work);
}

void qmv_run(const QmvArgs& a, bool force_scalar, bool int8_x) {
  qmv_run_many({a}, force_scalar, int8_x);
}

void dequantize_run(const QmvArgs& a, bool force_scalar) {
  run_rows(a, pick_deq(a, force_scalar), (long)a.N * a.K);
}


}  // namespace bc_native
