// Attention for many query positions (prefill of a long prompt), tiled: one task per
// (batch row, KV head, block of query positions). A task walks the keys in tiles, computes
// the tile's scores for all its rows with a register-blocked product, folds them into a
// running softmax (online softmax: running max and sum, the output rescaled when the max
// grows) and adds the tile's weighted values. Memory is a few tiles per thread whatever
// the length: the score matrix is never materialized, and under a causal mask the tiles
// past a block's last position are never touched (half the work of a square prompt).

#include "attention_tiled.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "softcap.h"

#include "simd.h"
#ifdef BC_X86
#define BC_AVX512 __attribute__((target("avx512f,avx2,fma")))
#endif

namespace bc_native {

#ifdef BC_X86
namespace {

constexpr int kBq = 64;  // query positions a task (x the grouped heads: its rows)
constexpr int kBk = 64;  // keys a tile

inline bool visible_at(const AttnArgs& a, int b, int h, int l, int t, float* add) {
  *add = 0.f;
  switch (a.mask_kind) {
    case MaskKind::causal:
      return t <= a.T - a.L + l;
    case MaskKind::boolean: {
      const auto* m = static_cast<const uint8_t*>(a.mask);
      return m[b * a.ms[0] + h * a.ms[1] + l * a.ms[2] + t * a.ms[3]] != 0;
    }
    case MaskKind::additive: {
      const auto* m = static_cast<const float*>(a.mask);
      *add = m[b * a.ms[0] + h * a.ms[1] + l * a.ms[2] + t * a.ms[3]];
      return *add != -INFINITY;
    }
    default:
      return true;
  }
}

// s[r][0..kBk) = q[r] . kt[:, j] for NR rows; kt is the key tile transposed (D x kBk), so
// each step over d is a broadcast of q[r][d] times two 8-key vectors.
template <int NR>
BC_AVX2 inline void qk_rows(const float* q, const float* kt, float* s, int D) {
  for (int j = 0; j < kBk; j += 16) {
    __m256 acc[NR][2];
    for (int r = 0; r < NR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int d = 0; d < D; ++d) {
      const __m256 k0 = _mm256_loadu_ps(kt + d * kBk + j);
      const __m256 k1 = _mm256_loadu_ps(kt + d * kBk + j + 8);
      for (int r = 0; r < NR; ++r) {
        const __m256 qd = _mm256_broadcast_ss(q + r * D + d);
        acc[r][0] = _mm256_fmadd_ps(qd, k0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(qd, k1, acc[r][1]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      _mm256_storeu_ps(s + r * kBk + j, acc[r][0]);
      _mm256_storeu_ps(s + r * kBk + j + 8, acc[r][1]);
    }
  }
}

// o[r] = o[r] * corr[r] + sum_j p[r][j] v[j] for NR rows, NV 8-float vectors of d at a time.
template <int NR, int NV>
BC_AVX2 inline void pv_rows(const float* p, const float* const* vrow, int nk, const float* corr,
                            float* o, int D, int d0) {
  __m256 acc[NR][NV];
  for (int r = 0; r < NR; ++r) {
    const __m256 c = _mm256_set1_ps(corr[r]);
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_mul_ps(_mm256_loadu_ps(o + r * D + d0 + 8 * v), c);
  }
  for (int j = 0; j < nk; ++j) {
    const float* vj = vrow[j] + d0;
    for (int r = 0; r < NR; ++r) {
      const __m256 w = _mm256_broadcast_ss(p + r * kBk + j);
      for (int v = 0; v < NV; ++v)
        acc[r][v] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 8 * v), acc[r][v]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(o + r * D + d0 + 8 * v, acc[r][v]);
}

template <int NR>
BC_AVX2 inline void pv_block(const float* p, const float* const* vrow, int nk, const float* corr,
                             float* o, int D) {
  int d0 = 0;
  for (; d0 + 32 <= D; d0 += 32) pv_rows<NR, 4>(p, vrow, nk, corr, o, D, d0);
  for (; d0 < D; d0 += 8) pv_rows<NR, 1>(p, vrow, nk, corr, o, D, d0);
}

// The same two products on 16-float vectors (AVX-512): a 64-key tile is 4 vectors, six rows
// a block (24 accumulators of 32 registers); twice the multiply-adds an instruction.
template <int NR>
BC_AVX512 inline void qk_rows512(const float* q, const float* kt, float* s, int D) {
  __m512 acc[NR][4];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int d = 0; d < D; ++d) {
    __m512 k[4];
    for (int v = 0; v < 4; ++v) k[v] = _mm512_loadu_ps(kt + d * kBk + 16 * v);
    for (int r = 0; r < NR; ++r) {
      const __m512 qd = _mm512_set1_ps(q[r * D + d]);
      for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_fmadd_ps(qd, k[v], acc[r][v]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < 4; ++v) _mm512_storeu_ps(s + r * kBk + 16 * v, acc[r][v]);
}

BC_AVX512 void qk_tile512(const float* q, const float* kt, float* s, int R, int D) {
  int r = 0;
  for (; r + 6 <= R; r += 6) qk_rows512<6>(q + (size_t)r * D, kt, s + (size_t)r * kBk, D);
  for (; r < R; ++r) qk_rows512<1>(q + (size_t)r * D, kt, s + (size_t)r * kBk, D);
}

template <int NR, int NV>
BC_AVX512 inline void pv_rows512(const float* p, const float* const* vrow, int nk,
                                 const float* corr, float* o, int D, int d0) {
  __m512 acc[NR][NV];
  for (int r = 0; r < NR; ++r) {
    const __m512 c = _mm512_set1_ps(corr[r]);
    for (int v = 0; v < NV; ++v)
      acc[r][v] = _mm512_mul_ps(_mm512_loadu_ps(o + r * D + d0 + 16 * v), c);
  }
  for (int j = 0; j < nk; ++j) {
    __m512 vj[NV];
    for (int v = 0; v < NV; ++v) vj[v] = _mm512_loadu_ps(vrow[j] + d0 + 16 * v);
    for (int r = 0; r < NR; ++r) {
      const __m512 w = _mm512_set1_ps(p[r * kBk + j]);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(w, vj[v], acc[r][v]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(o + r * D + d0 + 16 * v, acc[r][v]);
}

template <int NR>
BC_AVX512 inline void pv_block512(const float* p, const float* const* vrow, int nk,
                                  const float* corr, float* o, int D) {
  int d0 = 0;
  for (; d0 + 64 <= D; d0 += 64) pv_rows512<NR, 4>(p, vrow, nk, corr, o, D, d0);
  for (; d0 < D; d0 += 16) pv_rows512<NR, 1>(p, vrow, nk, corr, o, D, d0);
}

BC_AVX512 void pv_tile512(const float* p, const float* const* vrow, int nk, const float* corr,
                          float* o, int R, int D) {
  int r = 0;
  for (; r + 6 <= R; r += 6)
    pv_block512<6>(p + (size_t)r * kBk, vrow, nk, corr + r, o + (size_t)r * D, D);
  for (; r < R; ++r) pv_block512<1>(p + (size_t)r * kBk, vrow, nk, corr + r, o + (size_t)r * D, D);
}

bool cpu_has_avx512() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return ok;
}

// Keys t0 .. t0 + nk - 1 as a D x kBk tile (the last key repeated past nk): 8 x 8 blocks
// transposed in registers (a scalar copy cost more than a decode row's products).
BC_AVX2 inline void transpose8(const float* const* src, int d0, float* dst) {
  __m256 r[8], t[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src[j] + d0);
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 8; j += 4) {
    r[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
    r[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xEE);
    r[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
    r[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
  }
  // r[i] holds dims i (low half) and i + 4 (high half) of keys 0-3; r[i + 4] of keys 4-7
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + (size_t)i * kBk, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (size_t)(i + 4) * kBk, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

BC_AVX2 inline void transpose_tile(const float* kbase, int64_t stride, int t0, int nk, int D,
                                   float* kt) {
  const float* src[kBk];
  for (int j = 0; j < kBk; ++j) src[j] = kbase + (int64_t)(t0 + std::min(j, nk - 1)) * stride;
  for (int j0 = 0; j0 < kBk; j0 += 8)
    for (int d0 = 0; d0 < D; d0 += 8) transpose8(src + j0, d0, kt + (size_t)d0 * kBk + j0);
}

// dequantize_row (attention.h) on 8 values at a time: the same fused multiply-adds, so the
// same bits as the scalar one (groups are 32 or 64 wide: whole vectors).
BC_AVX2 inline void dequantize_row8(const uint8_t* row, int D, int bits, int group,
                                    float* out) {
  const int nw = D * bits / 8, groups = D / group;
  for (int g = 0; g < groups; ++g) {
    float scale, bias;
    std::memcpy(&scale, row + nw + 4 * g, 4);
    std::memcpy(&bias, row + nw + 4 * (groups + g), 4);
    const __m256 s8 = _mm256_set1_ps(scale), b8 = _mm256_set1_ps(bias);
    float* o = out + g * group;
    if (bits == 8) {
      const uint8_t* w = row + g * group;
      for (int i = 0; i < group; i += 8) {
        const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + i));
        const __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(x, s8, b8));
      }
    } else {  // 8 bytes = 16 values: low nibble first
      const uint8_t* w = row + g * group / 2;
      const __m128i low4 = _mm_set1_epi8(15);
      for (int i = 0; i < group; i += 16) {
        const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + i / 2));
        const __m128i lo = _mm_and_si128(q, low4);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), low4);
        const __m128i v = _mm_unpacklo_epi8(lo, hi);  // values i .. i + 15 in order
        const __m256 x0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
        const __m256 x1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(x0, s8, b8));
        _mm256_storeu_ps(o + i + 8, _mm256_fmadd_ps(x1, s8, b8));
      }
    }
  }
}

struct Scratch {
  std::vector<float> q, kt, s, o, m, l, corr, kf, vf;  // kf, vf: a quantized tile, as floats
  std::vector<const float*> vrow;
};

// The first key row (h, l) sees: keys before it (left padding of a batch) take no part,
// and the tiles start there, so a row's tiles hold the same keys in the same lanes whatever
// the padding, the batch, the chunk or the number of query positions (batch invariance).
// With a boolean mask whose visible keys are one run [lo, hi] (padding, then causal: what
// a batch's mask is), *hi is set and the tiles mask by position instead of reading the mask
// key by key (that lookup cost more than a decode row's products); else *hi = -1.
inline int first_visible(const AttnArgs& a, int b, int h, int l, int* hi) {
  *hi = -1;
  if (a.mask_kind == MaskKind::none || a.mask_kind == MaskKind::causal) return 0;
  if (a.mask_kind == MaskKind::boolean && a.ms[3] == 1) {
    const auto* m = static_cast<const uint8_t*>(a.mask) + b * a.ms[0] + h * a.ms[1] +
                    l * a.ms[2];
    int lo = 0, last = a.T - 1;
    while (lo < a.T && !m[lo]) ++lo;
    while (last >= lo && !m[last]) --last;
    if (lo <= last && !std::memchr(m + lo, 0, (size_t)(last - lo + 1))) *hi = last;
    return lo;
  }
  float add;
  int t = 0;
  while (t < a.T && !visible_at(a, b, h, l, t, &add)) ++t;
  return t;
}

// Rows (hs[i], ls[i]) of one (batch row, KV head), all with their first visible key at
// `origin`: keys in tiles of kBk from there, each folded into a running softmax. Every
// row's result is a fixed sequence of operations on its own visible keys: masked keys
// and the unused end of a tile add exact zeros, a tile of none changes nothing.
BC_AVX2 void tile_rows(const AttnArgs& a, int b, int g, const int* hs, const int* ls, int R,
                       int origin, const int* his, bool wide) {
  const int D = a.D;
  thread_local Scratch sc;
  sc.q.resize((size_t)R * D);
  sc.kt.resize((size_t)D * kBk);
  sc.s.resize((size_t)R * kBk);
  sc.o.assign((size_t)R * D, 0.f);
  sc.m.assign(R, -INFINITY);
  sc.l.assign(R, 0.f);
  if (a.sinks)  // each row's sink as a key seen first, with no value: weight exp(sink - m)
    for (int r = 0; r < R; ++r) sc.m[r] = a.sinks[hs[r]], sc.l[r] = 1.f;
  sc.corr.resize(R);
  sc.vrow.resize(kBk);
  float *q = sc.q.data(), *kt = sc.kt.data(), *s = sc.s.data(), *o = sc.o.data();
  // The scale is folded into q.
  const __m256 scale8 = _mm256_set1_ps(a.scale);
  int lmin = ls[0], lmax = ls[0];
  for (int r = 0; r < R; ++r) {
    lmin = std::min(lmin, ls[r]);
    lmax = std::max(lmax, ls[r]);
    const float* src = a.q + b * a.qs[0] + hs[r] * a.qs[1] + ls[r] * a.qs[2];
    for (int d = 0; d < D; d += 8)
      _mm256_storeu_ps(q + (size_t)r * D + d, _mm256_mul_ps(_mm256_loadu_ps(src + d), scale8));
  }
  const bool causal = a.mask_kind == MaskKind::causal;
  int first_limit = a.T - a.L + lmin;  // the last key every row sees (causal or his)
  int t_end = causal ? std::min(a.T, a.T - a.L + lmax + 1) : a.T;
  if (his) {
    first_limit = t_end = his[0];
    for (int r = 0; r < R; ++r) {
      first_limit = std::min(first_limit, his[r]);
      t_end = std::max(t_end, his[r]);
    }
    ++t_end;
  }
  t_end = std::min(t_end, row_keys(a, b));  // a row of its own ends where its buffer does
  const bool packed = a.kv_bits != 0;
  const float* kbase = packed ? nullptr : key_head(a, b, g);
  const float* vbase = packed ? nullptr : value_head(a, b, g);
  if (packed) {
    sc.kf.resize((size_t)kBk * D);
    sc.vf.resize((size_t)kBk * D);
  }
  for (int t0 = origin; t0 < t_end; t0 += kBk) {
    const int nk = std::min(kBk, t_end - t0);
    if (packed) {  // the tile's rows as floats, then the float path's very steps
      const uint8_t* kq = packed_key_head(a, b, g);
      const uint8_t* vq = packed_value_head(a, b, g);
      for (int j = 0; j < nk; ++j) {
        dequantize_row8(kq + (int64_t)(t0 + j) * a.ks[2], D, a.kv_bits, a.kv_group,
                        sc.kf.data() + (size_t)j * D);
        dequantize_row8(vq + (int64_t)(t0 + j) * a.vs[2], D, a.kv_bits, a.kv_group,
                        sc.vf.data() + (size_t)j * D);
      }
      transpose_tile(sc.kf.data(), D, 0, nk, D, kt);
      for (int j = 0; j < kBk; ++j) sc.vrow[j] = sc.vf.data() + (size_t)std::min(j, nk - 1) * D;
    } else {
      transpose_tile(kbase, a.ks[2], t0, nk, D, kt);
      for (int j = 0; j < kBk; ++j)
        sc.vrow[j] = vbase + (int64_t)(t0 + std::min(j, nk - 1)) * a.vs[2];
    }
    int r = 0;
    if (wide) {
      qk_tile512(q, kt, s, R, D);
    } else {
      for (; r + 4 <= R; r += 4) qk_rows<4>(q + (size_t)r * D, kt, s + (size_t)r * kBk, D);
      for (; r < R; ++r) qk_rows<1>(q + (size_t)r * D, kt, s + (size_t)r * kBk, D);
    }
    if (a.softcap > 0.f)  // every lane of the tile, before its mask (softcap.h)
      for (r = 0; r < R; ++r) softcap_avx2(s + (size_t)r * kBk, kBk, a.softcap);
    // Mask: keys past nk (padding of the last tile), then the mask itself where it can bite.
    const bool partial = causal || his ? t0 + nk - 1 > first_limit
                                       : a.mask_kind != MaskKind::none;
    for (r = 0; r < R; ++r) {
      float* sr = s + (size_t)r * kBk;
      for (int j = nk; j < kBk; ++j) sr[j] = -INFINITY;
      if (!partial) continue;
      if (his) {  // one run of visible keys: everything after the row's last is masked
        for (int j = std::max(0, his[r] + 1 - t0); j < nk; ++j) sr[j] = -INFINITY;
        continue;
      }
      for (int j = 0; j < nk; ++j) {
        float add;
        sr[j] = visible_at(a, b, hs[r], ls[r], t0 + j, &add) ? sr[j] + add : -INFINITY;
      }
    }
    // Online softmax: fold the tile into each row's running max m and sum l.
    for (r = 0; r < R; ++r) {
      float* sr = s + (size_t)r * kBk;
      __m256 mx8 = _mm256_loadu_ps(sr);
      for (int j = 8; j < kBk; j += 8) mx8 = _mm256_max_ps(mx8, _mm256_loadu_ps(sr + j));
      const float m_new = std::max(sc.m[r], hmax(mx8));
      if (m_new == -INFINITY) {  // nothing visible yet: weights 0, nothing to rescale
        std::fill(sr, sr + kBk, 0.f);
        sc.corr[r] = 1.f;
        continue;
      }
      const float corr = sc.m[r] == -INFINITY ? 0.f : std::exp(sc.m[r] - m_new);
      const __m256 m8 = _mm256_set1_ps(m_new), ninf = _mm256_set1_ps(-INFINITY);
      __m256 sum8 = _mm256_setzero_ps();
      for (int j = 0; j < kBk; j += 8) {
        const __m256 x = _mm256_loadu_ps(sr + j);
        // exp(-inf) clamps to ~6e-39 rather than 0: masked keys are zeroed explicitly.
        const __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(x, m8)),
                                       _mm256_cmp_ps(x, ninf, _CMP_NEQ_OQ));
        _mm256_storeu_ps(sr + j, e);
        sum8 = _mm256_add_ps(sum8, e);
      }
      sc.l[r] = sc.l[r] * corr + hsum(sum8);
      sc.m[r] = m_new;
      sc.corr[r] = corr;
    }
    const float* const* vrow = sc.vrow.data();
    if (wide) {
      pv_tile512(s, vrow, nk, sc.corr.data(), o, R, D);
      continue;
    }
    for (r = 0; r + 3 <= R; r += 3)
      pv_block<3>(s + (size_t)r * kBk, vrow, nk, sc.corr.data() + r, o + (size_t)r * D, D);
    for (; r < R; ++r)
      pv_block<1>(s + (size_t)r * kBk, vrow, nk, sc.corr.data() + r, o + (size_t)r * D, D);
  }
  for (int r = 0; r < R; ++r) {
    float* dst = a.out + (((size_t)b * a.Hq + hs[r]) * a.L + ls[r]) * D;
    const __m256 inv = _mm256_set1_ps(sc.l[r] == 0.f ? 0.f : 1.f / sc.l[r]);
    for (int d = 0; d < D; d += 8)
      _mm256_storeu_ps(dst + d, _mm256_mul_ps(_mm256_loadu_ps(o + (size_t)r * D + d), inv));
  }
}

// Query positions [l0, l0 + nl) of every head sharing KV head g: grouped by the first key
// they see (one group unless a mask gives rows of one batch row different starts).
BC_AVX2 void tiled_task(const AttnArgs& a, int b, int g, int l0, int nl, bool wide) {
  const int rep = a.Hq / a.Hkv, R = rep * nl;
  thread_local std::vector<int> hs, ls, lo, hi, order, gh, gl, ghi;
  hs.resize(R);
  ls.resize(R);
  lo.resize(R);
  hi.resize(R);
  bool same = true, runs = true;
  for (int r = 0; r < R; ++r) {
    hs[r] = g * rep + r / nl;
    ls[r] = l0 + r % nl;
    lo[r] = first_visible(a, b, hs[r], ls[r], &hi[r]);
    same = same && lo[r] == lo[0];
    runs = runs && hi[r] >= 0;
  }
  if (same) {
    tile_rows(a, b, g, hs.data(), ls.data(), R, lo[0], runs ? hi.data() : nullptr, wide);
    return;
  }
  order.resize(R);
  for (int r = 0; r < R; ++r) order[r] = r;
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return lo[x] < lo[y]; });
  for (int i = 0; i < R;) {
    int j = i;
    gh.clear();
    gl.clear();
    ghi.clear();
    bool group_runs = true;
    for (; j < R && lo[order[j]] == lo[order[i]]; ++j) {
      gh.push_back(hs[order[j]]);
      gl.push_back(ls[order[j]]);
      ghi.push_back(hi[order[j]]);
      group_runs = group_runs && hi[order[j]] >= 0;
    }
    const std::vector<int> h2 = gh, l2 = gl, hi2 = ghi;  // tile_rows may reuse the scratch
    tile_rows(a, b, g, h2.data(), l2.data(), j - i, lo[order[i]],
              group_runs ? hi2.data() : nullptr, wide);
    i = j;
  }
}

}  // namespace

bool attention_tiled_run(const AttnArgs& a, bool allow_avx512) {
  if (!cpu_has_avx2_fma() || a.D % 8 != 0) return false;
  // BATCHCHAT_NATIVE_AVX512=0 keeps the AVX2 products (tests of that path on new CPUs).
  const char* env = std::getenv("BATCHCHAT_NATIVE_AVX512");
  const bool wide = allow_avx512 && !(env && env[0] == '0') && a.D % 16 == 0 &&
                    cpu_has_avx512();
  const int blocks = (a.L + kBq - 1) / kBq;
  const long work = 2L * a.B * a.Hq * a.L * a.T * a.D;
  // Later blocks see more keys under a causal mask: hand them out first, so the last
  // tasks taken are the short ones and the threads finish together.
  parallel_chunks(a.B * a.Hkv * blocks, work, [a, blocks, wide](int c) {
    const int qb = blocks - 1 - c % blocks, bg = c / blocks;
    const int l0 = qb * kBq;
    tiled_task(a, bg / a.Hkv, bg % a.Hkv, l0, std::min(kBq, a.L - l0), wide);
  });
  return true;
}

#else

bool attention_tiled_run(const AttnArgs&, bool) { return false; }

#endif

}  // namespace bc_native
