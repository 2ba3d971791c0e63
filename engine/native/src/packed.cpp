// The packed int8 kernels of packed.h: AVX-512 VNNI (16 output rows a vector, vpdpbusd),
// AVX2 (the same 16 lanes as two vectors, maddubs + madd) and a portable loop, all with the
// arithmetic packed.h states, so their outputs are bitwise equal. A tile is one panel (16
// outputs) by up to 8 rows of x: the panel's weights are unpacked once for all of them,
// and every row keeps its own integer and float accumulators.

#include "packed.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "rowwise.h"
#include "simd.h"

namespace bc_native {

namespace {

// x prepared once per call: int8 rows, block steps, group sums.
struct Prep {
  const int8_t* q;
  const float* d;
  const float* xs;
  int M, K, blocks, groups;
};

inline int block_bytes(int bits) { return kPanel * 32 * bits / 8; }

struct PanelData {
  const uint8_t* w;  // the panel's weights, block after block
  const uint8_t* s;  // its scales (float32, 16 a group) or a K-quant's sub-scales
  const float* b;    // its biases (16 a group) or a K-quant's super-block d (and dmin)
};

inline PanelData panel_at(const PackedArgs& p, const Prep& x, int pn, int block_bytes) {
  return {p.w + (size_t)pn * x.blocks * block_bytes,
          static_cast<const uint8_t*>(p.s) + (size_t)pn * panel_scale_bytes(p.form, p.K, p.group_size),
          p.b + (size_t)pn * panel_bias_count(p.form, p.K, p.group_size)};
}

// kQ4K / kQ5K: group g's 6-bit sub-scale (min: its minimum) of lane n, and lane n's fp16 d
// (min: dmin), from the (panel, 256-block) scales packed.h lays out.
inline const uint8_t* super_scales(const PanelData& pd, int g) {
  return pd.s + (size_t)(g / 8) * kSuperScaleBytes;
}
inline int k4_sub(const PanelData& pd, int g, int n, bool min) {
  const uint8_t* sb = super_scales(pd, g);
  uint32_t high;
  std::memcpy(&high, sb + 128 + 4 * n, 4);
  const int gi = g % 8;
  return ((sb[16 * gi + n] >> (min ? 4 : 0)) & 15) | (((high >> (4 * gi + (min ? 2 : 0))) & 3) << 4);
}
inline float k4_d(const PanelData& pd, int g, int n, bool min) {
  return load_scale(super_scales(pd, g) + (min ? 224 : 192), (size_t)n, ScaleType::f16);
}

// Group g's scale and bias of lane n, as ggml_decode.cpp (and gguf-py) compute them.
inline float scale_of(int form, const PanelData& pd, int g, int n) {
  if (form == kQ4K || form == kQ5K) return k4_d(pd, g, n, false) * (float)k4_sub(pd, g, n, false);
  if (form == kQ6K) {
    const uint8_t* sb = pd.s + (size_t)(g / 16) * kSuperScaleBytes6;
    return load_scale(sb + 256, (size_t)n, ScaleType::f16) * (float)(int8_t)sb[(g % 16) * kPanel + n];
  }
  if (scale_only(form)) return load_scale(pd.s, (size_t)g * kPanel + n, ScaleType::f16);
  if (scale_min(form)) return load_scale(pd.s, (size_t)g * 2 * kPanel + n, ScaleType::f16);
  return reinterpret_cast<const float*>(pd.s)[g * kPanel + n];
}

inline float bias_of(int form, const PanelData& pd, int g, int n) {
  if (form == kQ4K || form == kQ5K) return -(k4_d(pd, g, n, true) * (float)k4_sub(pd, g, n, true));
  if (form == kQ6K) return scale_of(form, pd, g, n) * -32.f;
  if (scale_only(form)) return scale_of(form, pd, g, n) * scale_only_bias(form);
  if (scale_min(form)) return load_scale(pd.s, (size_t)(g * 2 + 1) * kPanel + n, ScaleType::f16);
  return pd.b[g * kPanel + n];
}

// ---------------------------------------------------------------- portable ----
void panel_portable(const PackedArgs& p, const Prep& x, int pn, int m0, int rows) {
  // subs: a block's sub-blocks with a scale of their own (2 for groups of 16)
  const int subs = p.group_size == 16 ? 2 : 1, width = 32 / subs;
  const int bpg = p.group_size >= 32 ? p.group_size / 32 : 1, BB = block_bytes(p.bits);
  const PanelData pd = panel_at(p, x, pn, BB);
  for (int n = 0; n < kPanel && pn * kPanel + n < p.N; ++n)
    for (int m = m0; m < m0 + rows; ++m) {
      const int8_t* xq = x.q + (size_t)m * x.K;
      float acc = 0.f;
      for (int b = 0; b < x.blocks; ++b) {
        const uint8_t* blk = pd.w + (size_t)b * BB;
        for (int sub = 0; sub < subs; ++sub) {
          int32_t sum = 0;
          for (int k = sub * width; k < (sub + 1) * width; ++k) {
            int q;
            if (p.bits == 4 || p.bits == 5 || p.bits == 6) {
              const int j = k / 8, i = k % 4, high = (k % 8) >= 4;
              const uint8_t byte = blk[j * 64 + 4 * n + i];
              q = high ? byte >> 4 : byte & 0x0f;
              if (p.bits == 6) {
                const int t = 2 * (j % 2) + high;
                q |= ((blk[256 + (j / 2) * 64 + 4 * n + i] >> (2 * t)) & 3) << 4;
              } else if (p.bits == 5) {
                q |= ((blk[256 + 4 * n + i] >> (2 * j + high)) & 1) << 4;
              }
            } else {
              q = blk[(k / 4) * 64 + 4 * n + k % 4];
            }
            sum += q * xq[b * 32 + k];
          }
          const int g = subs == 2 ? 2 * b + sub : b / bpg;
          const float f = scale_of(p.form, pd, g, n) * x.d[(size_t)m * x.blocks + b];
          acc = std::fma((float)sum, f, acc);
        }
      }
      for (int g = 0; g < x.groups; ++g)
        acc = std::fma(bias_of(p.form, pd, g, n), x.xs[(size_t)m * x.groups + g], acc);
      p.y[(size_t)m * p.N + pn * kPanel + n] = acc;
    }
}

#ifdef BC_X86
#define BC_AVX512VNNI \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")))

inline int32_t x4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ------------------------------------------------------------- AVX-512 VNNI ----
// kQ4K / kQ5K: group g's 16 sub-scales (min: minimums) as int32, from the 4 low bits a
// byte and the 2 high bits in each lane's uint32 (packed.h).
BC_AVX512VNNI inline __m512i k4_sub16(const uint8_t* sb, int gi, bool min) {
  const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 16 * gi)));
  const __m512i hi = _mm512_loadu_si512(sb + 128);
  const __m512i three = _mm512_set1_epi32(3), fifteen = _mm512_set1_epi32(15);
  const __m512i l = _mm512_and_si512(min ? _mm512_srli_epi32(lo, 4) : lo, fifteen);
  const __m512i h = _mm512_and_si512(_mm512_srl_epi32(hi, _mm_cvtsi32_si128(4 * gi + (min ? 2 : 0))), three);
  return _mm512_or_si512(l, _mm512_slli_epi32(h, 4));
}

template <int FORM>
BC_AVX512VNNI inline __m512 scale16(const PanelData& pd, int g) {
  if constexpr (FORM == kQ4K || FORM == kQ5K) {
    const uint8_t* sb = super_scales(pd, g);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 192)));
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(k4_sub16(sb, g % 8, false)));
  } else if constexpr (FORM == kQ6K) {
    const uint8_t* sb = pd.s + (size_t)(g / 16) * kSuperScaleBytes6;
    const __m512i sc = _mm512_cvtepi8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + (g % 16) * kPanel)));
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 256)));
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc));
  } else if constexpr (scale_only(FORM)) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pd.s + g * 2 * kPanel)));
  } else if constexpr (scale_min(FORM)) {  // d then m, 64 bytes a group
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pd.s + g * 4 * kPanel)));
  } else {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(pd.s) + g * kPanel);
  }
}

template <int FORM>
BC_AVX512VNNI inline __m512 bias16(const PanelData& pd, int g) {
  if constexpr (FORM == kQ4K || FORM == kQ5K) {
    const uint8_t* sb = super_scales(pd, g);
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 224)));
    const __m512 dm = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(k4_sub16(sb, g % 8, true)));
    return _mm512_xor_ps(dm, _mm512_set1_ps(-0.f));  // -(dmin * m), as the decoder negates
  } else if constexpr (FORM == kQ6K) {
    return _mm512_mul_ps(scale16<FORM>(pd, g), _mm512_set1_ps(-32.f));
  } else if constexpr (scale_only(FORM)) {
    return _mm512_mul_ps(scale16<FORM>(pd, g), _mm512_set1_ps(scale_only_bias(FORM)));
  } else if constexpr (scale_min(FORM)) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pd.s + (g * 4 + 2) * kPanel)));
  } else {
    return _mm512_loadu_ps(pd.b + g * kPanel);
  }
}

template <int BITS, int R, int SUBS, int FORM>
BC_AVX512VNNI void panel_512(const PackedArgs& p, const Prep& x, int pn, int m0) {
  const int bpg = p.group_size >= 32 ? p.group_size / 32 : 1, BB = block_bytes(BITS);
  const PanelData pd = panel_at(p, x, pn, BB);
  const int8_t* xq[R];
  for (int r = 0; r < R; ++r) xq[r] = x.q + (size_t)(m0 + r) * x.K;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  [[maybe_unused]] const __m512i bits45 = _mm512_set1_epi8(0x30), one8 = _mm512_set1_epi8(1);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  constexpr int steps = BITS == 8 ? 8 : 4, per_sub = steps / SUBS;
  for (int b = 0; b < x.blocks; ++b) {
    const uint8_t* blk = pd.w + (size_t)b * BB;
    for (int sub = 0; sub < SUBS; ++sub) {
      __m512i ia[R];
      for (int r = 0; r < R; ++r) ia[r] = _mm512_setzero_si512();
      for (int j = sub * per_sub; j < (sub + 1) * per_sub; ++j) {
        if constexpr (BITS == 4 || BITS == 5 || BITS == 6) {
          const __m512i v = _mm512_loadu_si512(blk + 64 * j);
          __m512i lo = _mm512_and_si512(v, low4);
          __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
          if constexpr (BITS == 6) {  // the high bit pairs into bits 4-5 (packed.h)
            const __m512i hp = _mm512_loadu_si512(blk + 256 + 64 * (j / 2));
            const __m512i hl = j % 2 ? hp : _mm512_slli_epi16(hp, 4);
            const __m512i hh = j % 2 ? _mm512_srli_epi16(hp, 2) : _mm512_slli_epi16(hp, 2);
            lo = _mm512_or_si512(lo, _mm512_and_si512(hl, bits45));
            hi = _mm512_or_si512(hi, _mm512_and_si512(hh, bits45));
          } else if constexpr (BITS == 5) {  // bits 2j and 2j + 1 of the plane into bit 4
            // (16-bit shifts by at most 7: the other byte's bits never reach bit 0)
            const __m512i hp = _mm512_loadu_si512(blk + 256);
            const __m512i bl = _mm512_and_si512(_mm512_srl_epi16(hp, _mm_cvtsi32_si128(2 * j)), one8);
            const __m512i bh =
                _mm512_and_si512(_mm512_srl_epi16(hp, _mm_cvtsi32_si128(2 * j + 1)), one8);
            lo = _mm512_or_si512(lo, _mm512_slli_epi16(bl, 4));
            hi = _mm512_or_si512(hi, _mm512_slli_epi16(bh, 4));
          }
          for (int r = 0; r < R; ++r) {
            ia[r] = _mm512_dpbusd_epi32(ia[r], lo, _mm512_set1_epi32(x4(xq[r] + b * 32 + 8 * j)));
            ia[r] = _mm512_dpbusd_epi32(ia[r], hi,
                                        _mm512_set1_epi32(x4(xq[r] + b * 32 + 8 * j + 4)));
          }
        } else {
          const __m512i w = _mm512_loadu_si512(blk + 64 * j);
          for (int r = 0; r < R; ++r)
            ia[r] = _mm512_dpbusd_epi32(ia[r], w, _mm512_set1_epi32(x4(xq[r] + b * 32 + 4 * j)));
        }
      }
      const int g = SUBS == 2 ? 2 * b + sub : b / bpg;
      const __m512 sv = scale16<FORM>(pd, g);
      for (int r = 0; r < R; ++r) {
        const __m512 f = _mm512_mul_ps(sv, _mm512_set1_ps(x.d[(size_t)(m0 + r) * x.blocks + b]));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[r]), f, acc[r]);
      }
    }
  }
  for (int g = 0; g < x.groups; ++g) {
    const __m512 bv = bias16<FORM>(pd, g);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(bv, _mm512_set1_ps(x.xs[(size_t)(m0 + r) * x.groups + g]), acc[r]);
  }
  const int n0 = pn * kPanel, count = std::min(kPanel, p.N - n0);
  const __mmask16 keep = (__mmask16)((1u << count) - 1);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(p.y + (size_t)(m0 + r) * p.N + n0, keep, acc[r]);
}

// -------------------------------------------------------------------- AVX2 ----
// The integer sum of 4 products per lane, as vpdpbusd gives it: maddubs (pairs into int16,
// no saturation: 5/6-bit q * 127 * 2 and 8-bit halves stay far below 32767) then madd.
template <int BITS>
BC_AVX2 inline __m256i dot4(__m256i w, __m256i xb) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (BITS != 8) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, xb), ones);
  } else {  // q = 16 hi + lo: a byte q up to 255 times 127 would saturate maddubs' pairs
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i lo = _mm256_and_si256(w, low4);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), low4);
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, xb), ones),
                            _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xb),
                                              _mm256_set1_epi16(16)));
  }
}

// k4_sub16 for 8 lanes: half h of the panel
BC_AVX2 inline __m256i k4_sub8(const uint8_t* sb, int gi, int h, bool min) {
  const __m256i lo = _mm256_cvtepu8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 16 * gi + 8 * h)));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 128 + 32 * h));
  const __m256i three = _mm256_set1_epi32(3), fifteen = _mm256_set1_epi32(15);
  const __m256i l = _mm256_and_si256(min ? _mm256_srli_epi32(lo, 4) : lo, fifteen);
  const __m256i hh = _mm256_and_si256(_mm256_srl_epi32(hi, _mm_cvtsi32_si128(4 * gi + (min ? 2 : 0))), three);
  return _mm256_or_si256(l, _mm256_slli_epi32(hh, 4));
}

// scale16 / bias16 for 8 lanes: half h of the panel
template <int FORM>
BC_AVX2 inline __m256 scale8(const PanelData& pd, int g, int h) {
  if constexpr (FORM == kQ4K || FORM == kQ5K) {
    const uint8_t* sb = super_scales(pd, g);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 192 + 16 * h)));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(k4_sub8(sb, g % 8, h, false)));
  } else if constexpr (FORM == kQ6K) {
    const uint8_t* sb = pd.s + (size_t)(g / 16) * kSuperScaleBytes6;
    const __m256i sc = _mm256_cvtepi8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + (g % 16) * kPanel + 8 * h)));
    const __m256 d =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 256 + 16 * h)));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(sc));
  } else if constexpr (scale_only(FORM)) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(pd.s + (g * kPanel + 8 * h) * 2)));
  } else if constexpr (scale_min(FORM)) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(pd.s + (g * 2 * kPanel + 8 * h) * 2)));
  } else {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(pd.s) + g * kPanel + 8 * h);
  }
}

template <int FORM>
BC_AVX2 inline __m256 bias8(const PanelData& pd, int g, int h) {
  if constexpr (FORM == kQ4K || FORM == kQ5K) {
    const uint8_t* sb = super_scales(pd, g);
    const __m256 dmin =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 224 + 16 * h)));
    const __m256 dm = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(k4_sub8(sb, g % 8, h, true)));
    return _mm256_xor_ps(dm, _mm256_set1_ps(-0.f));
  } else if constexpr (FORM == kQ6K) {
    return _mm256_mul_ps(scale8<FORM>(pd, g, h), _mm256_set1_ps(-32.f));
  } else if constexpr (scale_only(FORM)) {
    return _mm256_mul_ps(scale8<FORM>(pd, g, h), _mm256_set1_ps(scale_only_bias(FORM)));
  } else if constexpr (scale_min(FORM)) {
    return _mm256_cvtph_ps(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(pd.s + ((g * 2 + 1) * kPanel + 8 * h) * 2)));
  } else {
    return _mm256_loadu_ps(pd.b + g * kPanel + 8 * h);
  }
}

template <int BITS, int R, int SUBS, int FORM>
BC_AVX2 void panel_avx2(const PackedArgs& p, const Prep& x, int pn, int m0) {
  const int bpg = p.group_size >= 32 ? p.group_size / 32 : 1, BB = block_bytes(BITS);
  const PanelData pd = panel_at(p, x, pn, BB);
  const int8_t* xq[R];
  for (int r = 0; r < R; ++r) xq[r] = x.q + (size_t)(m0 + r) * x.K;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  [[maybe_unused]] const __m256i bits45 = _mm256_set1_epi8(0x30), one8 = _mm256_set1_epi8(1);
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  constexpr int steps = BITS == 8 ? 8 : 4, per_sub = steps / SUBS;
  for (int b = 0; b < x.blocks; ++b) {
    const uint8_t* blk = pd.w + (size_t)b * BB;
    for (int sub = 0; sub < SUBS; ++sub) {
      __m256i ia[R][2];
      for (int r = 0; r < R; ++r) ia[r][0] = ia[r][1] = _mm256_setzero_si256();
      for (int j = sub * per_sub; j < (sub + 1) * per_sub; ++j) {
        for (int h = 0; h < 2; ++h) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * j + 32 * h));
          if constexpr (BITS == 4 || BITS == 5 || BITS == 6) {
            __m256i lo = _mm256_and_si256(v, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
            if constexpr (BITS == 6) {
              const __m256i hp = _mm256_loadu_si256(
                  reinterpret_cast<const __m256i*>(blk + 256 + 64 * (j / 2) + 32 * h));
              const __m256i hl = j % 2 ? hp : _mm256_slli_epi16(hp, 4);
              const __m256i hh = j % 2 ? _mm256_srli_epi16(hp, 2) : _mm256_slli_epi16(hp, 2);
              lo = _mm256_or_si256(lo, _mm256_and_si256(hl, bits45));
              hi = _mm256_or_si256(hi, _mm256_and_si256(hh, bits45));
            } else if constexpr (BITS == 5) {
              const __m256i hp =
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 256 + 32 * h));
              const __m256i bl =
                  _mm256_and_si256(_mm256_srl_epi16(hp, _mm_cvtsi32_si128(2 * j)), one8);
              const __m256i bh =
                  _mm256_and_si256(_mm256_srl_epi16(hp, _mm_cvtsi32_si128(2 * j + 1)), one8);
              lo = _mm256_or_si256(lo, _mm256_slli_epi16(bl, 4));
              hi = _mm256_or_si256(hi, _mm256_slli_epi16(bh, 4));
            }
            for (int r = 0; r < R; ++r) {
              const __m256i xl = _mm256_set1_epi32(x4(xq[r] + b * 32 + 8 * j));
              const __m256i xh = _mm256_set1_epi32(x4(xq[r] + b * 32 + 8 * j + 4));
              ia[r][h] = _mm256_add_epi32(ia[r][h],
                                          _mm256_add_epi32(dot4<BITS>(lo, xl), dot4<BITS>(hi, xh)));
            }
          } else {
            for (int r = 0; r < R; ++r)
              ia[r][h] = _mm256_add_epi32(
                  ia[r][h], dot4<8>(v, _mm256_set1_epi32(x4(xq[r] + b * 32 + 4 * j))));
          }
        }
      }
      const int g = SUBS == 2 ? 2 * b + sub : b / bpg;
      for (int h = 0; h < 2; ++h) {
        const __m256 sv = scale8<FORM>(pd, g, h);
        for (int r = 0; r < R; ++r) {
          const __m256 f = _mm256_mul_ps(sv, _mm256_set1_ps(x.d[(size_t)(m0 + r) * x.blocks + b]));
          acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[r][h]), f, acc[r][h]);
        }
      }
    }
  }
  for (int g = 0; g < x.groups; ++g)
    for (int h = 0; h < 2; ++h) {
      const __m256 bv = bias8<FORM>(pd, g, h);
      for (int r = 0; r < R; ++r)
        acc[r][h] = _mm256_fmadd_ps(
            bv, _mm256_set1_ps(x.xs[(size_t)(m0 + r) * x.groups + g]), acc[r][h]);
    }
  const int n0 = pn * kPanel, count = std::min(kPanel, p.N - n0);
  for (int r = 0; r < R; ++r) {
    float* y = p.y + (size_t)(m0 + r) * p.N + n0;
    if (count == kPanel) {
      _mm256_storeu_ps(y, acc[r][0]);
      _mm256_storeu_ps(y + 8, acc[r][1]);
    } else {
      alignas(32) float tmp[kPanel];
      _mm256_store_ps(tmp, acc[r][0]);
      _mm256_store_ps(tmp + 8, acc[r][1]);
      std::memcpy(y, tmp, sizeof(float) * count);
    }
  }
}
#endif

enum class Path { portable, avx2, avx512 };

// One panel for rows [m0, m0 + rows): tiles of 8, 4, 2, 1 rows (AVX2: 2, 1).
template <int BITS, int SUBS, int FORM>
void panel_rows_as(Path path, const PackedArgs& p, const Prep& x, int pn, int m0, int rows) {
#ifdef BC_X86
  if (path == Path::avx512) {
    for (int m = m0, end = m0 + rows; m < end;) {
      const int left = end - m;
      if (left >= 8) { panel_512<BITS, 8, SUBS, FORM>(p, x, pn, m); m += 8; }
      else if (left >= 4) { panel_512<BITS, 4, SUBS, FORM>(p, x, pn, m); m += 4; }
      else if (left >= 2) { panel_512<BITS, 2, SUBS, FORM>(p, x, pn, m); m += 2; }
      else { panel_512<BITS, 1, SUBS, FORM>(p, x, pn, m); m += 1; }
    }
    return;
  }
  if (path == Path::avx2) {
    for (int m = m0, end = m0 + rows; m < end;) {
      if (end - m >= 2) { panel_avx2<BITS, 2, SUBS, FORM>(p, x, pn, m); m += 2; }
      else { panel_avx2<BITS, 1, SUBS, FORM>(p, x, pn, m); m += 1; }
    }
    return;
  }
#endif
  (void)path;
  panel_portable(p, x, pn, m0, rows);
}

void panel_rows(Path path, const PackedArgs& p, const Prep& x, int pn, int m0, int rows) {
  if (p.form == kQ4K) return panel_rows_as<4, 1, kQ4K>(path, p, x, pn, m0, rows);
  if (p.form == kQ6K) return panel_rows_as<6, 2, kQ6K>(path, p, x, pn, m0, rows);
  if (p.form == kQ5K) return panel_rows_as<5, 1, kQ5K>(path, p, x, pn, m0, rows);
  if (p.form == kQ40) return panel_rows_as<4, 1, kQ40>(path, p, x, pn, m0, rows);
  if (p.form == kQ80) return panel_rows_as<8, 1, kQ80>(path, p, x, pn, m0, rows);
  if (p.form == kQ50) return panel_rows_as<5, 1, kQ50>(path, p, x, pn, m0, rows);
  if (p.form == kQ51) return panel_rows_as<5, 1, kQ51>(path, p, x, pn, m0, rows);
  if (p.form == kQ41) return panel_rows_as<4, 1, kQ41>(path, p, x, pn, m0, rows);
  const bool four = p.bits == 4, g16 = p.group_size == 16;
  if (four) g16 ? panel_rows_as<4, 2, kAffine>(path, p, x, pn, m0, rows)
                : panel_rows_as<4, 1, kAffine>(path, p, x, pn, m0, rows);
  else g16 ? panel_rows_as<8, 2, kAffine>(path, p, x, pn, m0, rows)
           : panel_rows_as<8, 1, kAffine>(path, p, x, pn, m0, rows);
}

// Rows a block of packed_run_many's chunks: about kBlockBytes of int8 x (three quarters of a core's
// L2 on the EPYC this was tuned on), whole tiles of 8 rows; all rows when they fit.
constexpr long kBlockBytes = 768 * 1024;
int row_block(int M, int K) {
  const long fit = std::max(8L, kBlockBytes / std::max(1, K) / 8 * 8);
  return M <= fit ? M : (int)fit;
}

Path pick(bool force_scalar) {
  if (force_scalar || !cpu_has_avx2_fma()) return Path::portable;
  return avx512_vnni_enabled() ? Path::avx512 : Path::avx2;
}

}  // namespace

const char* packed_kernel_name(bool force_scalar) {
  switch (pick(force_scalar)) {
    case Path::avx512: return "avx512-vnni";
    case Path::avx2: return "avx2";
    default: return "portable";
  }
}

void pack_block32(const uint8_t* q, int bits, int ln, uint8_t* blk) {
  if (bits == 8) {
    for (int j = 0; j < 8; ++j) std::memcpy(blk + j * 64 + 4 * ln, q + 4 * j, 4);
    return;
  }
  // byte j*64 + 4n + i = q[8j+i] | q[8j+4+i]<<4 (the low nibbles of 6-bit values)
  for (int j = 0; j < 4; ++j) {
    uint8_t* d = blk + j * 64 + 4 * ln;
    for (int i = 0; i < 4; ++i)
      d[i] = (uint8_t)((q[8 * j + i] & 0x0f) | ((q[8 * j + 4 + i] & 0x0f) << 4));
  }
  if (bits == 5) {  // the high bits: byte 4n + i, bit t = 2j + half (packed.h)
    for (int i = 0; i < 4; ++i) {
      int byte = 0;
      for (int t = 0; t < 8; ++t) byte |= ((q[8 * (t / 2) + 4 * (t % 2) + i] >> 4) & 1) << t;
      blk[256 + 4 * ln + i] = (uint8_t)byte;
    }
  }
  if (bits == 6) {  // the high bit pairs: plane h, byte 4n + i, bits 2t (packed.h)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 4; ++i) {
        int byte = 0;
        for (int t = 0; t < 4; ++t) {
          const int j = 2 * h + t / 2, k = 8 * j + 4 * (t % 2) + i;
          byte |= (q[k] >> 4) << (2 * t);
        }
        blk[256 + h * 64 + 4 * ln + i] = (uint8_t)byte;
      }
  }
}

void pack_row(const uint8_t* row, int K, int bits, int ln, uint8_t* panel) {
  const int blocks = K / 32, BB = block_bytes(bits);
  for (int b = 0; b < blocks; ++b) {
    uint8_t* blk = panel + (size_t)b * BB;
    if (bits == 8) {  // value k is byte k
      for (int j = 0; j < 8; ++j) std::memcpy(blk + j * 64 + 4 * ln, row + b * 32 + 4 * j, 4);
    } else {  // value k is nibble k (low first): byte j*64 + 4n + i = q[8j+i] | q[8j+4+i]<<4
      const uint8_t* src = row + b * 16;
      for (int j = 0; j < 4; ++j) {
        const uint8_t* s8 = src + 4 * j;  // values 8j .. 8j+7
        uint8_t* d = blk + j * 64 + 4 * ln;
        d[0] = (uint8_t)((s8[0] & 0x0f) | (s8[2] << 4));
        d[1] = (uint8_t)((s8[0] >> 4) | (s8[2] & 0xf0));
        d[2] = (uint8_t)((s8[1] & 0x0f) | (s8[3] << 4));
        d[3] = (uint8_t)((s8[1] >> 4) | (s8[3] & 0xf0));
      }
    }
  }
}

void clear_last_panel(int N, int K, int group_size, int bits, uint8_t* wp, void* sp,
                      float* bp, int form) {
  if (N % kPanel == 0) return;
  const int P = panels(N);
  const size_t panel_bytes = (size_t)(K / 32) * block_bytes(bits);
  const size_t s_bytes = panel_scale_bytes(form, K, group_size);
  const size_t b_count = panel_bias_count(form, K, group_size);
  std::memset(wp + (size_t)(P - 1) * panel_bytes, 0, panel_bytes);
  std::memset(static_cast<uint8_t*>(sp) + (size_t)(P - 1) * s_bytes, 0, s_bytes);
  std::fill(bp + (size_t)(P - 1) * b_count, bp + (size_t)P * b_count, 0.f);
}

void pack_weights(const QmvArgs& a, uint8_t* wp, float* sp, float* bp) {
  // Output rows in parallel, each row's blocks copied a k-step at a time (a 1.5B model's
  // ~1.5e9 weights: a per-weight loop with divisions took ~7 s of its load on 2 cores).
  const int N = a.N, K = a.K, bits = a.bits, groups = K / a.group_size, blocks = K / 32;
  const int BB = block_bytes(bits), P = panels(N);
  const size_t row_bytes = (size_t)K * bits / 8;
  clear_last_panel(N, K, a.group_size, bits, wp, sp, bp);  // rows past N are zero
  parallel_chunks(P, (long)N * K, [&](int pn) {
    for (int ln = 0; ln < kPanel && pn * kPanel + ln < N; ++ln) {
      const int n = pn * kPanel + ln;
      const uint8_t* row = reinterpret_cast<const uint8_t*>(a.w) + (size_t)n * row_bytes;
      pack_row(row, K, bits, ln, wp + (size_t)pn * blocks * BB);
      for (int g = 0; g < groups; ++g) {
        const size_t at = ((size_t)pn * groups + g) * kPanel + ln;
        sp[at] = load_scale(a.scales, (size_t)n * groups + g, a.stype);
        bp[at] = load_scale(a.biases, (size_t)n * groups + g, a.stype);
      }
    }
  });
}

void packed_run_many(const float* x, int M, const std::vector<PackedArgs>& parts,
                     bool force_scalar) {
  if (parts.empty() || M == 0) return;
  const int K = parts[0].K;
  // x rounded once for each group size among the parts (a Q4_K_M file's Q6_K v, group 16,
  // beside its Q4_K q and k, group 32): each part reads what a call of its own would make
  constexpr int kSizes = 3;  // group sizes 16, 32, 64
  auto slot = [](int gs) { return gs == 16 ? 0 : gs == 32 ? 1 : 2; };
  thread_local std::vector<int8_t> q[kSizes];
  thread_local std::vector<float> d[kSizes], xs[kSizes];
  Prep preps[kSizes] = {};
  for (const auto& p : parts) {
    const int i = slot(p.group_size), gs = p.group_size;
    if (preps[i].q != nullptr) continue;
    q[i].resize((size_t)M * K);
    d[i].resize((size_t)M * (K / 32));
    xs[i].resize((size_t)M * (K / gs));
    quantize_rows_int8(x, M, K, gs, force_scalar, q[i].data(), d[i].data(), xs[i].data());
    preps[i] = Prep{q[i].data(), d[i].data(), xs[i].data(), M, K, K / 32, K / gs};
  }
  const Path path = pick(force_scalar);
  // Chunks of panels for the threads; each chunk does a block of rows (a panel's weights
  // stay in L1 across the row tiles, the block's int8 rows in L2 across the panels: a
  // prompt chunk's rows all at once, 2,048 x 1,536 bytes, streamed from L3 for every panel,
  // cost a 2,048-token chunk ~35 % more CPU than four of 512). The chunks go block by
  // block, so the threads share a block. A row's outputs never depend on the split.
  struct Chunk {
    int part, first, m0;
  };
  std::vector<Chunk> chunks;
  int total = 0;
  for (const auto& p : parts) total += panels(p.N);
  const int threads = qmv_threads();
  const int per = std::max(1, (total + 4 * threads - 1) / (4 * threads));
  const int block = row_block(M, K);
  for (int m0 = 0; m0 < M; m0 += block)
    for (int i = 0; i < (int)parts.size(); ++i)
      for (int pn = 0; pn < panels(parts[i].N); pn += per) chunks.push_back({i, pn, m0});
  long work = 0;
  for (const auto& p : parts) work += (long)M * p.N * K;
  parallel_chunks((int)chunks.size(), work, [&](int c) {
    const Chunk ch = chunks[c];
    const PackedArgs& p = parts[ch.part];
    const int rows = std::min(block, M - ch.m0);
    for (int pn = ch.first; pn < std::min(panels(p.N), ch.first + per); ++pn)
      panel_rows(path, p, preps[slot(p.group_size)], pn, ch.m0, rows);
  });
}

namespace {

// y (M, N): row m = sum over slots j in order of fma(w[m * k + j], pairs[at[m * k + j]], acc)
// from acc = 0 (at -1: a pair without an expert, zeros). fma on every path: the same bits.
#ifdef BC_X86
BC_AVX2 void weighted_slots_avx2(const float* pairs, const int* at, const float* w, int M,
                                 int k, int N, float* y) {
  for (int m = 0; m < M; ++m) {
    float* ym = y + (size_t)m * N;
    int n = 0;
    for (; n + 8 <= N; n += 8) {
      __m256 acc = _mm256_setzero_ps();
      for (int j = 0; j < k; ++j) {
        const int a = at[m * k + j];
        const __m256 v = a < 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(pairs + (size_t)a * N + n);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(w[m * k + j]), v, acc);
      }
      _mm256_storeu_ps(ym + n, acc);
    }
    for (; n < N; ++n) {
      float acc = 0.f;
      for (int j = 0; j < k; ++j) {
        const int a = at[m * k + j];
        acc = std::fma(w[m * k + j], a < 0 ? 0.f : pairs[(size_t)a * N + n], acc);
      }
      ym[n] = acc;
    }
  }
}
#endif

void weighted_slots(const float* pairs, const int* at, const float* w, int M, int k, int N,
                    float* y, bool force_scalar) {
#ifdef BC_X86
  if (!force_scalar && cpu_has_avx2_fma()) return weighted_slots_avx2(pairs, at, w, M, k, N, y);
#endif
  (void)force_scalar;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float acc = 0.f;
      for (int j = 0; j < k; ++j) {
        const int a = at[m * k + j];
        acc = std::fma(w[m * k + j], a < 0 ? 0.f : pairs[(size_t)a * N + n], acc);
      }
      y[(size_t)m * N + n] = acc;
    }
}

}  // namespace

void packed_run_experts(const float* x, int M, int X, int k, const uint32_t* idx, int E,
                        const std::vector<PackedArgs>& parts, bool force_scalar, int out,
                        const float* slot_weights) {
  if (parts.empty() || M == 0 || k == 0) return;
  const int K = parts[0].K, gs = parts[0].group_size, blocks = K / 32, groups = K / gs;
  const int R = M * k;
  // each source row of x rounded to int8 once (gate and up share it; per-row arithmetic)
  thread_local std::vector<int8_t> q0, q;
  thread_local std::vector<float> d0, xs0, d, xs;
  const int S = M * X;
  q0.resize((size_t)S * K);
  d0.resize((size_t)S * blocks);
  xs0.resize((size_t)S * groups);
  quantize_rows_int8(x, S, K, gs, force_scalar, q0.data(), d0.data(), xs0.data());
  // counting sort of the (row, slot) pairs by expert, stable
  thread_local std::vector<int> start, order;
  start.assign(E + 1, 0);
  for (int r = 0; r < R; ++r)
    if (idx[r] < (uint32_t)E) ++start[idx[r] + 1];
  for (int e = 0; e < E; ++e) start[e + 1] += start[e];
  const int used = start[E];
  order.resize(used);
  {
    std::vector<int> at(start.begin(), start.end() - 1);
    for (int r = 0; r < R; ++r)
      if (idx[r] < (uint32_t)E) order[at[idx[r]]++] = r;
  }
  // the pairs' prepared rows in that order: each expert's rows contiguous
  q.resize((size_t)used * K);
  d.resize((size_t)used * blocks);
  xs.resize((size_t)used * groups);
  for (int i = 0; i < used; ++i) {
    const int r = order[i], src = (r / k) * X + (X == 1 ? 0 : r % k);
    std::memcpy(q.data() + (size_t)i * K, q0.data() + (size_t)src * K, K);
    std::memcpy(d.data() + (size_t)i * blocks, d0.data() + (size_t)src * blocks,
                sizeof(float) * blocks);
    std::memcpy(xs.data() + (size_t)i * groups, xs0.data() + (size_t)src * groups,
                sizeof(float) * groups);
  }
  thread_local std::vector<std::vector<float>> sorted;
  sorted.resize(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) sorted[i].resize((size_t)used * parts[i].N);
  const Path path = pick(force_scalar);
  struct Chunk {
    int part, expert, first;
  };
  std::vector<Chunk> chunks;
  int total = 0;
  for (const auto& p : parts)
    for (int e = 0; e < E; ++e)
      if (start[e + 1] > start[e]) total += panels(p.N);
  const int threads = qmv_threads();
  const int per = std::max(1, (total + 4 * threads - 1) / (4 * threads));
  long work = 0;
  for (int i = 0; i < (int)parts.size(); ++i) {
    work += (long)used * parts[i].N * K;
    for (int e = 0; e < E; ++e)
      if (start[e + 1] > start[e])
        for (int pn = 0; pn < panels(parts[i].N); pn += per) chunks.push_back({i, e, pn});
  }
  // thread_local buffers are named by pointer: inside the workers the names would be theirs
  const int8_t* qs = q.data();
  const float *ds = d.data(), *xss = xs.data();
  const int* first_row = start.data();
  std::vector<float*> outs;
  for (auto& v : sorted) outs.push_back(v.data());
  parallel_chunks((int)chunks.size(), work, [&](int c) {
    const Chunk ch = chunks[c];
    const PackedArgs& p = parts[ch.part];
    const int P = panels(p.N), s0 = first_row[ch.expert];
    const int rows = first_row[ch.expert + 1] - s0;
    PackedArgs pe = p;
    pe.w = p.w + (size_t)ch.expert * P * blocks * block_bytes(p.bits);
    pe.s = static_cast<const uint8_t*>(p.s) +
           (size_t)ch.expert * P * panel_scale_bytes(p.form, K, p.group_size);
    pe.b = p.b + (size_t)ch.expert * P * panel_bias_count(p.form, K, p.group_size);
    pe.y = outs[ch.part] + (size_t)s0 * p.N;
    const Prep prep{qs + (size_t)s0 * K, ds + (size_t)s0 * blocks, xss + (size_t)s0 * groups,
                    rows, K, blocks, groups};
    for (int pn = ch.first; pn < std::min(P, ch.first + per); ++pn)
      panel_rows(path, pe, prep, pn, 0, rows);
  });
  if (out == kSwiGLU) {  // silu(gate) * up in place of gate, each pair's row alone
    const int N = parts[0].N;
    if (N % 8 == 0)  // silu_mul_run's chunks and tail then fall on whole rows
      silu_mul_run(sorted[0].data(), sorted[1].data(), sorted[0].data(), (int64_t)used * N,
                   force_scalar);
    else
      for (int j = 0; j < used; ++j)
        silu_mul_run(sorted[0].data() + (size_t)j * N, sorted[1].data() + (size_t)j * N,
                     sorted[0].data() + (size_t)j * N, N, force_scalar);
  }
  if (out == kWeightedSum) {
    thread_local std::vector<int> at;  // pair r's place among the sorted rows, -1: none
    at.assign(R, -1);
    for (int j = 0; j < used; ++j) at[order[j]] = j;
    weighted_slots(sorted[0].data(), at.data(), slot_weights, M, k, parts[0].N,
                   parts[0].y, force_scalar);
    return;
  }
  // back to each pair's own place; a pair with no expert gets zeros
  for (size_t i = 0; i < (out == kSwiGLU ? 1 : parts.size()); ++i) {
    const int N = parts[i].N;
    if (used < R) std::fill(parts[i].y, parts[i].y + (size_t)R * N, 0.f);
    for (int j = 0; j < used; ++j)
      std::memcpy(parts[i].y + (size_t)order[j] * N, sorted[i].data() + (size_t)j * N,
                  sizeof(float) * N);
  }
}

}  // namespace bc_native
