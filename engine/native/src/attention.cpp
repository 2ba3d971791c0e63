// Attention of a few query positions over a KV cache, one task per (batch row, KV head):
// the rep = Hq / Hkv query heads sharing a KV head and all L positions are that task's
// rows, so each key and value vector is read once for all of them (grouped-query heads in
// one pass). Two passes: scores for every (row, key) into a scratch buffer, then the
// softmax-weighted sum of values. No score matrix for the whole batch, no copy of a
// strided cache view, one MLX op instead of ~8 (scale, two matmuls, mask, softmax parts).

#include "attention.h"
#include "attention_tiled.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "softcap.h"

#include "simd.h"

namespace bc_native {
namespace {

// Is key t visible to row r (query position l), and what is added to its score?
inline bool visible(const AttnArgs& a, int b, int h, int l, int t, float* add) {
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

// Scores (R rows x T keys, -inf where masked) of one task; row r = query head
// g * rep + r / L at position r % L.
void scores_scalar(const AttnArgs& a, int b, int g, float* s) {
  const int rep = a.Hq / a.Hkv, R = rep * a.L, Tb = row_keys(a, b);
  const float* khead = key_head(a, b, g);
  for (int t = 0; t < a.T; ++t) {
    const float* kt = khead + t * a.ks[2];
    for (int r = 0; r < R; ++r) {
      const int h = g * rep + r / a.L, l = r % a.L;
      float add;
      if (t >= Tb || !visible(a, b, h, l, t, &add)) {
        s[(size_t)r * a.T + t] = -INFINITY;
        continue;
      }
      const float* qr = a.q + b * a.qs[0] + h * a.qs[1] + l * a.qs[2];
      float dot = 0.f;
      for (int d = 0; d < a.D; ++d) dot += qr[d] * kt[d];
      s[(size_t)r * a.T + t] = dot * a.scale + add;
    }
  }
}

// Turns a row of scores into unnormalized weights; returns their sum (0: all masked).
// `sink` (-inf: none) joins the max and the sum as a key without a value.
float softmax_row_scalar(float* s, int T, float sink) {
  float mx = sink;
  for (int t = 0; t < T; ++t) mx = std::max(mx, s[t]);
  if (mx == -INFINITY) {
    std::fill(s, s + T, 0.f);
    return 0.f;
  }
  float sum = sink == -INFINITY ? 0.f : std::exp(sink - mx);
  for (int t = 0; t < T; ++t) sum += (s[t] = std::exp(s[t] - mx));
  return sum;
}

void values_scalar(const AttnArgs& a, int b, int g, const float* p, const float* sums) {
  const int rep = a.Hq / a.Hkv, R = rep * a.L;
  for (int r = 0; r < R; ++r) {
    const int h = g * rep + r / a.L, l = r % a.L;
    float* o = a.out + (((size_t)b * a.Hq + h) * a.L + l) * a.D;
    std::fill(o, o + a.D, 0.f);
    if (sums[r] == 0.f) continue;
    const float* vhead = value_head(a, b, g);
    for (int t = 0, Tb = row_keys(a, b); t < Tb; ++t) {
      const float w = p[(size_t)r * a.T + t];
      if (w == 0.f) continue;
      const float* vt = vhead + t * a.vs[2];
      for (int d = 0; d < a.D; ++d) o[d] += w * vt[d];
    }
    const float inv = 1.f / sums[r];
    for (int d = 0; d < a.D; ++d) o[d] *= inv;
  }
}

#ifdef BC_X86
// The 8 horizontal sums of v[0..7] as one vector.
BC_AVX2 inline __m256 hsum8(const __m256* v) {
  const __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20),
                       _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

BC_AVX2 void scores_avx2(const AttnArgs& a, int b, int g, float* s) {
  const int rep = a.Hq / a.Hkv, R = rep * a.L, D = a.D;
  const bool plain = a.mask_kind == MaskKind::none;
  const __m256 scale8 = _mm256_set1_ps(a.scale);
  // Blocks of 8 keys: 8 dot products a row share one reduction (a horizontal sum per
  // score cost as much as its multiply-adds); the mask is applied afterwards.
  // A row of its own that ends inside a block still takes that block's arithmetic (its
  // scores are then the bits of the same row in a shared buffer): its missing keys read
  // its first key instead and are masked below.
  const int Tb = row_keys(a, b), T8 = std::min(a.T & ~7, (Tb + 7) & ~7);
  const float* khead = key_head(a, b, g);
  for (int t0 = 0; t0 < T8; t0 += 8) {
    const float* kt[8];
    for (int j = 0; j < 8; ++j) kt[j] = khead + (t0 + j < Tb ? t0 + j : 0) * a.ks[2];
    for (int r = 0; r < R; ++r) {
      const int h = g * rep + r / a.L, l = r % a.L;
      const float* qr = a.q + b * a.qs[0] + h * a.qs[1] + l * a.qs[2];
      __m256 acc[8];
      const __m256 q0 = _mm256_loadu_ps(qr);
      for (int j = 0; j < 8; ++j) acc[j] = _mm256_mul_ps(q0, _mm256_loadu_ps(kt[j]));
      for (int d = 8; d < D; d += 8) {
        const __m256 qd = _mm256_loadu_ps(qr + d);
        for (int j = 0; j < 8; ++j)
          acc[j] = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kt[j] + d), acc[j]);
      }
      float* out = s + (size_t)r * a.T + t0;
      _mm256_storeu_ps(out, _mm256_mul_ps(hsum8(acc), scale8));
      if (!plain)
        for (int j = 0; j < 8; ++j) {
          float add;
          out[j] = visible(a, b, h, l, t0 + j, &add) ? out[j] + add : -INFINITY;
        }
      if (t0 + 8 > Tb)  // the block that crosses a row's own end: its missing keys
        for (int j = Tb - t0; j < 8; ++j) out[j] = -INFINITY;
    }
  }
  for (int t = T8; t < a.T; ++t) {
    const float* kt = khead + t * a.ks[2];
    for (int r = 0; r < R; ++r) {
      const int h = g * rep + r / a.L, l = r % a.L;
      float add = 0.f;
      if (t >= Tb || (!plain && !visible(a, b, h, l, t, &add))) {
        s[(size_t)r * a.T + t] = -INFINITY;
        continue;
      }
      const float* qr = a.q + b * a.qs[0] + h * a.qs[1] + l * a.qs[2];
      __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(qr), _mm256_loadu_ps(kt));
      for (int d = 8; d < D; d += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(qr + d), _mm256_loadu_ps(kt + d), acc);
      s[(size_t)r * a.T + t] = hsum(acc) * a.scale + add;
    }
  }
}

BC_AVX2 float softmax_row_avx2(float* s, int T, float sink) {
  float mx = sink;
  for (int t = 0; t < T; ++t) mx = std::max(mx, s[t]);
  if (mx == -INFINITY) {
    std::fill(s, s + T, 0.f);
    return 0.f;
  }
  const __m256 m8 = _mm256_set1_ps(mx);
  __m256 acc = _mm256_setzero_ps();
  int t = 0;
  for (; t + 8 <= T; t += 8) {
    // exp(-inf - mx) clamps to exp(-88) ~ 6e-39, not 0: masked keys are zeroed below.
    const __m256 x = _mm256_loadu_ps(s + t);
    __m256 e = exp8(_mm256_sub_ps(x, m8));
    e = _mm256_and_ps(e, _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ));
    _mm256_storeu_ps(s + t, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = hsum(acc);
  for (; t < T; ++t) sum += (s[t] = s[t] == -INFINITY ? 0.f : std::exp(s[t] - mx));
  return sink == -INFINITY ? sum : sum + std::exp(sink - mx);
}

BC_AVX2 void values_avx2(const AttnArgs& a, int b, int g, const float* p, const float* sums,
                         float* acc) {
  const int rep = a.Hq / a.Hkv, R = rep * a.L, D = a.D;
  std::fill(acc, acc + (size_t)R * D, 0.f);
  const float* vhead = value_head(a, b, g);
  for (int t = 0, Tb = row_keys(a, b); t < Tb; ++t) {
    const float* vt = vhead + t * a.vs[2];
    for (int r = 0; r < R; ++r) {
      const float w = p[(size_t)r * a.T + t];
      if (w == 0.f) continue;
      const __m256 w8 = _mm256_set1_ps(w);
      float* o = acc + (size_t)r * D;
      for (int d = 0; d < D; d += 8)
        _mm256_storeu_ps(o + d, _mm256_fmadd_ps(w8, _mm256_loadu_ps(vt + d),
                                                _mm256_loadu_ps(o + d)));
    }
  }
  for (int r = 0; r < R; ++r) {
    const int h = g * rep + r / a.L, l = r % a.L;
    float* o = a.out + (((size_t)b * a.Hq + h) * a.L + l) * D;
    const float inv = sums[r] == 0.f ? 0.f : 1.f / sums[r];
    for (int d = 0; d < D; ++d) o[d] = acc[(size_t)r * D + d] * inv;
  }
}
#endif

// Row r's sink (its query head's), -inf where there are none.
inline float sink(const AttnArgs& a, int g, int r) {
  return a.sinks ? a.sinks[g * (a.Hq / a.Hkv) + r / a.L] : -INFINITY;
}

void task(const AttnArgs& a, int b, int g, bool simd) {
  const int R = a.Hq / a.Hkv * a.L;
  thread_local std::vector<float> scratch;
  scratch.resize((size_t)R * a.T + R + (size_t)R * a.D);
  float* s = scratch.data();
  float* sums = s + (size_t)R * a.T;
  float* acc = sums + R;
  // soft-capping of the scores (masked keys already -inf: a boolean or causal mask only)
  const bool cap = a.softcap > 0.f;
#ifdef BC_X86
  if (simd) {
    scores_avx2(a, b, g, s);
    if (cap) softcap_scalar(s, (int64_t)R * a.T, a.softcap);
    for (int r = 0; r < R; ++r) sums[r] = softmax_row_avx2(s + (size_t)r * a.T, a.T, sink(a, g, r));
    values_avx2(a, b, g, s, sums, acc);
    return;
  }
#endif
  (void)acc;
  scores_scalar(a, b, g, s);
  if (cap) softcap_scalar(s, (int64_t)R * a.T, a.softcap);
  for (int r = 0; r < R; ++r) sums[r] = softmax_row_scalar(s + (size_t)r * a.T, a.T, sink(a, g, r));
  values_scalar(a, b, g, s, sums);
}

}  // namespace

void attention_run(const AttnArgs& in, bool force_scalar, int tiled_from) {
  // Quantized KV takes the tiled kernel at every query count (one arithmetic); where it
  // cannot run (no AVX2, or forced scalar), the rows are dequantized whole first.
  if (in.kv_bits && !force_scalar && attention_tiled_run(in)) return;
  std::vector<float> kf, vf;
  AttnArgs a = in;
  if (in.kv_bits) {
    const size_t rows = (size_t)a.B * a.Hkv * a.T;
    kf.resize(rows * a.D);
    vf.resize(rows * a.D);
    for (int b = 0; b < a.B; ++b)  // keys past a row's own buffer stay 0 (masked)
      for (int h = 0; h < a.Hkv; ++h)
        for (int t = 0, Tb = row_keys(in, b); t < Tb; ++t) {
          const size_t at = (((size_t)b * a.Hkv + h) * a.T + t) * a.D;
          dequantize_row(packed_key_head(in, b, h) + t * in.ks[2], a.D, a.kv_bits,
                         a.kv_group, kf.data() + at);
          dequantize_row(packed_value_head(in, b, h) + t * in.vs[2], a.D, a.kv_bits,
                         a.kv_group, vf.data() + at);
        }
    a.k = kf.data();
    a.v = vf.data();
    a.rows = nullptr;
    a.ks[0] = a.vs[0] = (int64_t)a.Hkv * a.T * a.D;
    a.ks[1] = a.vs[1] = (int64_t)a.T * a.D;
    a.ks[2] = a.vs[2] = a.D;
    a.kv_bits = 0;
    tiled_from = 1;
  }
  if (!force_scalar && tiled_from > 0 && a.L >= tiled_from && attention_tiled_run(a)) return;
  const bool simd = !force_scalar && cpu_has_avx2_fma() && a.D % 8 == 0;
  const long work = 2L * a.B * a.Hq * a.L * a.T * a.D;
  parallel_chunks(a.B * a.Hkv, work, [a, simd](int c) { task(a, c / a.Hkv, c % a.Hkv, simd); });
}

}  // namespace bc_native
