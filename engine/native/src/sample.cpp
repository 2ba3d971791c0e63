#include "sample.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels.h"
#include "simd.h"

namespace bc_native {

namespace {

// sum_i exp(l_i - m) over a row: the mass top-p compares against (49,152 exps a row; in
// double one at a time it was most of a row's cost). Float lanes, summed in double at the end.
#ifdef BC_X86
BC_AVX2 double mass_avx2(const float* l, int V, float m) {
  const __m256 m8 = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= V; i += 8) acc = _mm256_add_ps(acc, exp8(_mm256_sub_ps(_mm256_loadu_ps(l + i), m8)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  double total = 0.0;
  for (float v : lanes) total += v;
  for (; i < V; ++i) total += std::exp((double)l[i] - m);
  return total;
}
#endif

double row_mass(const float* l, int V, float m) {
#ifdef BC_X86
  if (cpu_has_avx2_fma()) return mass_avx2(l, V, m);
#endif
  double total = 0.0;
  for (int i = 0; i < V; ++i) total += std::exp((double)l[i] - m);
  return total;
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

constexpr int kBuckets = 2048;

// The tokens kept_tokens keeps when it cuts no top-k, in id order (the first entries of
// idx; returns how many): min-p's floor and top-p's cut are both values, so they are the
// tokens at or above the higher of the two. Top-p's cut is the value of the token at which
// the descending order's mass first reaches top_p times the whole mass: found by putting
// the min-p survivors in buckets of value (their masses summed a bucket, in id order),
// walking the buckets from the top to the one where the mass reaches the limit and
// ordering only that bucket's tokens, instead of selecting through the whole kept set.
// The passes over the row keep or drop a token without a branch (a random-weight model's
// row keeps a third of its tokens in no order a branch predictor could learn).
int kept_by_value(const float* l, int V, float m, float top_p, float min_p,
                  std::vector<int>& idx, std::vector<double>& mass, std::vector<int>& tie) {
  if (!(m > -INFINITY)) return 0;
  float lo = min_p > 0.f ? m + std::log(min_p) : -INFINITY;
  if (!(lo > -INFINITY)) {  // no min-p: every finite value
    lo = m;
    for (int i = 0; i < V; ++i) lo = std::min(lo, l[i] > -INFINITY ? l[i] : lo);
  }
  idx.resize(V);
  int n = 0;
  for (int i = 0; i < V; ++i) {
    idx[n] = i;
    n += l[i] >= lo;
  }
  if (!(top_p > 0.f && top_p < 1.f)) return n;
  const double limit = (double)top_p * row_mass(l, V, m);
  const float inv = m > lo ? (float)kBuckets / (m - lo) : 0.f;
  auto bucket = [=](float v) { return std::min(kBuckets - 1, (int)((m - v) * inv)); };
  mass.assign(kBuckets, 0.0);
  for (int r = 0; r < n; ++r) mass[bucket(l[idx[r]])] += std::exp((double)l[idx[r]] - m);
  // the bucket where the mass reaches the limit; its tokens in descending order
  double base = 0.0;
  auto desc = [l](int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  for (int b = 0; b < kBuckets; ++b) {
    if (mass[b] == 0.0 || base + mass[b] < limit) {
      base += mass[b];
      continue;
    }
    tie.clear();
    for (int r = 0; r < n; ++r)
      if (bucket(l[idx[r]]) == b) tie.push_back(idx[r]);
    std::sort(tie.begin(), tie.end(), desc);
    for (int t : tie) {
      base += std::exp((double)l[t] - m);
      if (base >= limit) {
        const float cut = l[t];
        int k = 0;
        for (int r = 0; r < n; ++r) {
          const int i = idx[r];
          idx[k] = i;
          k += l[i] >= cut;
        }
        return k;
      }
    }
    // the bucket's sum rounded past the limit, its tokens one by one did not: go on
  }
  return n;  // the kept tokens' whole mass stays under the limit: all of them
}

void sample_row(const SampleArgs& a, int b, std::vector<int>& idx, std::vector<double>& w) {
  const float* l = a.logits + (size_t)b * a.V;
  const float* p = a.params + (size_t)b * 4;
  const float temp = p[0], top_p = p[1], min_p = p[2];
  const int top_k = (int)p[3];
  const float m = row_max(l, a.V);
  int keep = 0;
  if (top_k <= 0) {
    thread_local std::vector<double> mass;
    thread_local std::vector<int> tie;
    keep = kept_by_value(l, a.V, m, top_p, min_p, idx, mass, tie);
  } else {
    keep = kept_tokens(l, a.V, top_p, min_p, top_k, idx);
  }
  if (keep == 0) {
    a.out[b] = 0;
    return;
  }
  float mk = -INFINITY;
  for (int r = 0; r < keep; ++r) mk = std::max(mk, l[idx[r]]);
  w.resize(keep);
  double total = 0.0;
  for (int r = 0; r < keep; ++r) total += (w[r] = std::exp(((double)l[idx[r]] - mk) / temp));
  const double target = (double)a.u[b] * total;
  double run = 0.0;
  int pick = idx[keep - 1];  // u * total rounding past the sum: the last kept token
  for (int r = 0; r < keep; ++r) {
    run += w[r];
    if (run > target) {
      pick = idx[r];
      break;
    }
  }
  a.out[b] = pick;
}

}  // namespace

void sample_run(const SampleArgs& a) {
  parallel_chunks(a.B, (long)a.B * a.V * 8, [&a](int b) {
    thread_local std::vector<int> idx;
    thread_local std::vector<double> w;
    sample_row(a, b, idx, w);
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
