#include "sample.h"

#include <algorithm>
#include <functional>
#include <cmath>
#include <numeric>
#include <vector>

#include "exp1.h"
#include "kernels.h"
#include "simd.h"

namespace bc_native {

namespace {

// sum_i exp(l_i - m) over a row: the mass top-p compares against (49,152 exps a row; in
// double one at a time it was most of a row's cost). Float lanes, summed in double at the end.
// With `e`, each exp is kept there too (e[i] = exp1_cephes(l_i - m) on every path, the
// bits of exp8's lanes), for the walk that finds top-p's cut: a double exp a kept token
// made a flat 152k-logit row cost ~3 ms (issue #48).
#ifdef BC_X86
BC_AVX2 double mass_avx2(const float* l, int V, float m, float* e) {
  const __m256 m8 = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= V; i += 8) {
    const __m256 x = exp8(_mm256_sub_ps(_mm256_loadu_ps(l + i), m8));
    if (e) _mm256_storeu_ps(e + i, x);
    acc = _mm256_add_ps(acc, x);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  double total = 0.0;
  for (float v : lanes) total += v;
  for (; i < V; ++i) {
    const float x = exp1_cephes(l[i] - m);
    if (e) e[i] = x;
    total += x;
  }
  return total;
}
#endif

double row_mass(const float* l, int V, float m, float* e = nullptr) {
#ifdef BC_X86
  if (cpu_has_avx2_fma()) return mass_avx2(l, V, m, e);
#endif
  double total = 0.0;
  for (int i = 0; i < V; ++i) {
    const float x = exp1_cephes(l[i] - m);
    if (e) e[i] = x;
    total += x;
  }
  return total;
}

// The draw's weights w[r] = exp((l[idx[r]] - m) / temp) of the kept tokens, in float with
// exp8's polynomial (exp1_cephes in the tail and without AVX2: the same bits): a double exp
// a kept token was ~1.5 ms of a flat 152k-logit row. Gathered by a plain loop first (AVX2's
// gather instruction is slower on the machines this runs on).
#ifdef BC_X86
BC_AVX2 void exps_avx2(float* w, int n, float m, float temp) {
  const __m256 m8 = _mm256_set1_ps(m), t8 = _mm256_set1_ps(temp);
  int r = 0;
  for (; r + 8 <= n; r += 8)
    _mm256_storeu_ps(w + r, exp8(_mm256_div_ps(_mm256_sub_ps(_mm256_loadu_ps(w + r), m8), t8)));
  for (; r < n; ++r) w[r] = exp1_cephes((w[r] - m) / temp);
}
#endif

void draw_weights(const float* l, const int* idx, int keep, float m, float temp, float* w) {
  for (int r = 0; r < keep; ++r) w[r] = l[idx[r]];
#ifdef BC_X86
  if (cpu_has_avx2_fma()) return exps_avx2(w, keep, m, temp);
#endif
  for (int r = 0; r < keep; ++r) w[r] = exp1_cephes((w[r] - m) / temp);
}

// The sum of w[0, n) in double, in a fixed order: eight lanes (w[8q + j] into lane j),
// then the lanes pairwise. The AVX2 loop and the plain one give the same bits.
constexpr int kBlock = 256;

#ifdef BC_X86
BC_AVX2 double block_sum_avx2(const float* w, int n) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int r = 0;
  for (; r + 8 <= n; r += 8) {
    const __m256 x = _mm256_loadu_ps(w + r);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
  }
  alignas(32) double lane[8];
  _mm256_store_pd(lane, lo);
  _mm256_store_pd(lane + 4, hi);
  for (int j = 0; r < n; ++r, ++j) lane[j] += w[r];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}
#endif

double block_sum(const float* w, int n) {
#ifdef BC_X86
  if (cpu_has_avx2_fma()) return block_sum_avx2(w, n);
#endif
  double lane[8] = {};
  int r = 0;
  for (; r + 8 <= n; r += 8)
    for (int j = 0; j < 8; ++j) lane[j] += w[r + j];
  for (int j = 0; r < n; ++r, ++j) lane[j] += w[r];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// The draw: the first r where the running sum of w passes u times the whole. The whole is
// the blocks' sums (kBlock weights each, block_sum) added in order; the walk skips whole
// blocks and adds one weight at a time only inside the block that holds the target (a
// sequential double sum of 152k weights, twice, was ~0.3 ms). `n - 1` when rounding never
// passes it.
int draw_position(const float* w, int n, float u, std::vector<double>& blocks) {
  const int nb = (n + kBlock - 1) / kBlock;
  blocks.resize(nb);
  double total = 0.0;
  for (int j = 0; j < nb; ++j) total += (blocks[j] = block_sum(w + j * kBlock, std::min(kBlock, n - j * kBlock)));
  const double target = (double)u * total;
  double run = 0.0;
  for (int j = 0; j < nb; ++j) {
    if (run + blocks[j] <= target) {
      run += blocks[j];
      continue;
    }
    const int end = std::min(n, (j + 1) * kBlock);
    for (int r = j * kBlock; r < end; ++r) {
      run += w[r];
      if (run > target) return r;
    }
  }
  return n - 1;
}

// The kept tokens of one row (the first entries of idx, in id order); returns how many.
int kept_tokens(const float* l, int V, float top_p, float min_p, int top_k,
                std::vector<int>& idx) {
  const float m = *std::max_element(l, l + V);
  // min-p cuts at a value; top-p and top-k cut the descending order, so only the tokens
  // above the min-p line ever need ordering
  const float floor_ = min_p > 0.f ? m + std::log(min_p) : -INFINITY;
  idx.clear();
  for (int i = 0; i < V; ++i)
    if (l[i] >= floor_ && l[i] > -INFINITY) idx.push_back(i);
  const int n = (int)idx.size();
  if (n == 0) return 0;
  auto desc = [l](int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  const bool nucleus = top_p > 0.f && top_p < 1.f;
  int keep = n;
  if (nucleus) {
    // the mass of the whole distribution, as mlx-lm's top-p sees it
    const double limit = (double)top_p * row_mass(l, V, m);
    // mlx-lm keeps a token while the mass of the tokens above it is below top_p * total:
    // keep = the smallest r whose top r tokens reach the limit. Found by selection (split
    // the range at its middle rank, go to the half holding the cut), not a sort.
    int lo = 0, hi = n;
    double base = 0.0;  // mass of the tokens ranked above [lo, hi)
    while (hi - lo > 32) {
      const int mid = lo + (hi - lo) / 2;
      std::nth_element(idx.begin() + lo, idx.begin() + mid, idx.begin() + hi, desc);
      double upper = 0.0;
      for (int r = lo; r < mid; ++r) upper += std::exp((double)l[idx[r]] - m);
      if (base + upper >= limit) {
        hi = mid;
      } else {
        base += upper;
        lo = mid;
      }
    }
    std::sort(idx.begin() + lo, idx.begin() + hi, desc);
    keep = hi;
    for (int r = lo; r < hi; ++r) {
      if (base >= limit) {
        keep = r;
        break;
      }
      base += std::exp((double)l[idx[r]] - m);
    }
    // ... and every token at the smallest kept value (mlx-lm's threshold is a value)
    const float smallest = l[idx[keep - 1]];
    for (int r = keep; r < n; ++r)
      if (l[idx[r]] >= smallest) std::swap(idx[r], idx[keep++]);
  }
  if (top_k > 0 && top_k < keep) {
    std::nth_element(idx.begin(), idx.begin() + top_k - 1, idx.begin() + keep, desc);
    keep = top_k;
  }
  // The draw walks the kept tokens in id order (any fixed order gives the same
  // distribution; this one needs no sort of a large kept set).
  std::sort(idx.begin(), idx.begin() + keep);
  return keep;
}

// The row's largest logit (max_element's value; a vector max on AVX2).
#ifdef BC_X86
BC_AVX2 float max_avx2(const float* l, int V) {
  __m256 acc = _mm256_set1_ps(-INFINITY);
  int i = 0;
  for (; i + 8 <= V; i += 8) acc = _mm256_max_ps(acc, _mm256_loadu_ps(l + i));
  float m = hmax(acc);
  for (; i < V; ++i) m = std::max(m, l[i]);
  return m;
}
#endif

float row_max(const float* l, int V) {
#ifdef BC_X86
  if (cpu_has_avx2_fma()) return max_avx2(l, V);
#endif
  return *std::max_element(l, l + V);
}

constexpr int kBuckets = 1024;

// The ids i with l[i] >= t, in id order, written from idx[0]; returns how many. Branch-free
// (a random-weight model's row keeps a third of its tokens in no order a branch predictor
// could learn); on AVX2 eight at a time, packed by a permutation looked up from the mask.
#ifdef BC_X86
BC_AVX2 int at_least_avx2(const float* l, int V, float t, int* idx) {
  static const auto pack = [] {  // for each 8-bit mask: the set lanes' numbers, first
    std::vector<int32_t> p(256 * 8, 0);
    for (int mask = 0; mask < 256; ++mask)
      for (int j = 0, k = 0; j < 8; ++j)
        if (mask >> j & 1) p[mask * 8 + k++] = j;
    return p;
  }();
  const __m256 t8 = _mm256_set1_ps(t);
  const __m256i step = _mm256_set1_epi32(8);
  __m256i ids = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  int n = 0, i = 0;
  for (; i + 8 <= V; i += 8, ids = _mm256_add_epi32(ids, step)) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(l + i), t8, _CMP_GE_OQ));
    const __m256i perm = _mm256_loadu_si256((const __m256i*)(pack.data() + mask * 8));
    _mm256_storeu_si256((__m256i*)(idx + n), _mm256_permutevar8x32_epi32(ids, perm));
    n += __builtin_popcount(mask);
  }
  for (; i < V; ++i) {
    idx[n] = i;
    n += l[i] >= t;
  }
  return n;
}
#endif

// idx has room for V + 8 ids (the AVX2 loop writes eight at a time).
int at_least(const float* l, int V, float t, int* idx) {
#ifdef BC_X86
  if (cpu_has_avx2_fma()) return at_least_avx2(l, V, t, idx);
#endif
  int n = 0;
  for (int i = 0; i < V; ++i) {
    idx[n] = i;
    n += l[i] >= t;
  }
  return n;
}

// Each token's bucket of value below the row's largest logit m: min(kBuckets - 1,
// trunc((m - l) * inv)) for l >= lo, kBuckets (no bucket) below lo. The same float
// operations on AVX2 and without it.
#ifdef BC_X86
BC_AVX2 void buckets_avx2(const float* l, int V, float m, float inv, float lo, int32_t* at) {
  const __m256 m8 = _mm256_set1_ps(m), inv8 = _mm256_set1_ps(inv), lo8 = _mm256_set1_ps(lo);
  const __m256i top = _mm256_set1_epi32(kBuckets - 1), none = _mm256_set1_epi32(kBuckets);
  int i = 0;
  for (; i + 8 <= V; i += 8) {
    const __m256 v = _mm256_loadu_ps(l + i);
    // below lo the product may be inf or NaN; its lanes take `none` whatever it converts to
    const __m256i b = _mm256_min_epi32(
        top, _mm256_cvttps_epi32(_mm256_mul_ps(_mm256_sub_ps(m8, v), inv8)));
    const __m256i kept = _mm256_castps_si256(_mm256_cmp_ps(v, lo8, _CMP_GE_OQ));
    _mm256_storeu_si256((__m256i*)(at + i), _mm256_blendv_epi8(none, b, kept));
  }
  for (; i < V; ++i) at[i] = l[i] >= lo ? std::min(kBuckets - 1, (int)((m - l[i]) * inv)) : kBuckets;
}
#endif

void bucket_ids(const float* l, int V, float m, float inv, float lo, int32_t* at) {
#ifdef BC_X86
  if (cpu_has_avx2_fma()) return buckets_avx2(l, V, m, inv, lo, at);
#endif
  for (int i = 0; i < V; ++i)
    at[i] = l[i] >= lo ? std::min(kBuckets - 1, (int)((m - l[i]) * inv)) : kBuckets;
}

// A row's working memory, one a thread, reused row after row (passed by reference so that
// the loops below do not look up thread-local storage at every token).
struct Scratch {
  std::vector<int> idx;      // kept token ids, in id order
  std::vector<float> e;      // exp(l_i - m) of the row: top-p's masses
  std::vector<int32_t> at;   // each token's bucket (bucket_ids)
  std::vector<double> mass;  // kLanes histograms of kBuckets masses
  std::vector<float> tie;    // the values in the cut's bucket
  std::vector<float> w;      // the draw's weights
  std::vector<double> blocks;
};

// Each token's mass goes to histogram r % kLanes: consecutive tokens of one bucket then do
// not wait on each other's add.
constexpr int kLanes = 2;

// The tokens kept_tokens keeps when it cuts no top-k, in id order (the first entries of
// s.idx; returns how many): min-p's floor and top-p's cut are both values, so they are the
// tokens at or above the higher of the two. Top-p's cut is the value of the token at which
// the descending order's mass first reaches top_p times the whole mass: found by putting
// the min-p survivors in buckets of value (their masses summed a bucket), walking the
// buckets from the top to the one where the mass reaches the limit and ordering only that
// bucket's values, instead of selecting through the whole kept set. The cut is a value,
// so tokens of equal value need no order among themselves.
__attribute__((noinline)) int kept_by_value(const float* l, int V, float m, float top_p,
                                            float min_p, Scratch& s) {
  if (!(m > -INFINITY)) return 0;
  float lo = min_p > 0.f ? m + std::log(min_p) : -INFINITY;
  if (!(lo > -INFINITY)) {  // no min-p: every finite value
    lo = m;
    for (int i = 0; i < V; ++i) lo = std::min(lo, l[i] > -INFINITY ? l[i] : lo);
  }
  std::vector<int>& idx = s.idx;
  idx.resize((size_t)V + 8);
  const int n = at_least(l, V, lo, idx.data());
  if (!(top_p > 0.f && top_p < 1.f)) return n;
  s.e.resize(V);
  s.at.resize(V);
  const float* e = s.e.data();
  const int32_t* at = s.at.data();
  const double limit = (double)top_p * row_mass(l, V, m, s.e.data());
  const float inv = m > lo ? (float)kBuckets / (m - lo) : 0.f;
  bucket_ids(l, V, m, inv, lo, s.at.data());
  s.mass.assign((size_t)kLanes * kBuckets, 0.0);
  double* h = s.mass.data();
  for (int r = 0; r < n; ++r) {
    const int i = idx[r];
    h[(r % kLanes) * kBuckets + at[i]] += e[i];
  }
  for (int j = 1; j < kLanes; ++j)
    for (int b = 0; b < kBuckets; ++b) h[b] += h[j * kBuckets + b];
  // the bucket where the mass reaches the limit; its values in descending order
  double base = 0.0;
  for (int b = 0; b < kBuckets; ++b) {
    if (h[b] == 0.0 || base + h[b] < limit) {
      base += h[b];
      continue;
    }
    std::vector<float>& tie = s.tie;
    tie.clear();
    for (int i = 0; i < V; ++i)
      if (at[i] == b) tie.push_back(l[i]);
    std::sort(tie.begin(), tie.end(), std::greater<float>());
    for (float v : tie) {
      base += exp1_cephes(v - m);  // e[i] of a token of value v
      if (base >= limit) return at_least(l, V, v, idx.data());  // v >= lo: min-p holds
    }
    // the bucket's sum rounded past the limit, its tokens one by one did not: go on
  }
  return n;  // the kept tokens' whole mass stays under the limit: all of them
}

__attribute__((noinline)) void sample_row(const SampleArgs& a, int b, Scratch& s) {
  const float* l = a.logits + (size_t)b * a.V;
  const float* p = a.params + (size_t)b * 4;
  const float temp = p[0], top_p = p[1], min_p = p[2];
  const int top_k = (int)p[3];
  const float m = row_max(l, a.V);
  const int keep = top_k <= 0 ? kept_by_value(l, a.V, m, top_p, min_p, s)
                              : kept_tokens(l, a.V, top_p, min_p, top_k, s.idx);
  if (keep == 0) {
    a.out[b] = 0;
    return;
  }
  // every filter keeps the row's largest logit m, so the weights are relative to it
  s.w.resize(keep);
  draw_weights(l, s.idx.data(), keep, m, temp, s.w.data());
  a.out[b] = s.idx[draw_position(s.w.data(), keep, a.u[b], s.blocks)];
}

}  // namespace

void sample_run(const SampleArgs& a) {
  parallel_chunks(a.B, (long)a.B * a.V * 8, [&a](int b) {
    thread_local Scratch s;
    sample_row(a, b, s);
  });
}

void penalize_copy(const float* logits, int B, int V, const int32_t* at, int W,
                   const float* factor, const int32_t* pending, float* out) {
  std::copy(logits, logits + (size_t)B * V, out);
  for (int b = 0; b < B; ++b) {
    const float* row = logits + (size_t)b * V;  // the values before any is penalized
    float* dst = out + (size_t)b * V;
    const float f = factor[b];
    for (int w = 0; w < W; ++w) {
      int32_t t = at[(size_t)b * W + w];
      if (t < 0) t = pending ? pending[b] : -1;
      if (t < 0 || t >= V) continue;
      const float v = row[t];
      dst[t] = v < 0.f ? v * f : v / f;
    }
  }
}

}  // namespace bc_native
