#include "moe_route.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace bc_native {

void moe_route_run(const float* logits, int64_t M, int E, int k, bool normalise,
                   uint32_t* inds, float* scores) {
  std::vector<float> p(E);
  std::vector<char> taken(E);
  for (int64_t m = 0; m < M; ++m) {
    const float* l = logits + m * E;
    float top = l[0];
    for (int e = 1; e < E; ++e) top = std::max(top, l[e]);
    float sum = 0.f;
    for (int e = 0; e < E; ++e) sum += (p[e] = std::exp(l[e] - top));
    for (int e = 0; e < E; ++e) p[e] /= sum;
    std::fill(taken.begin(), taken.end(), 0);
    uint32_t* in = inds + m * k;
    float* sc = scores + m * k;
    float chosen = 0.f;
    for (int j = 0; j < k; ++j) {  // k is small (2-8): a scan each
      int best = -1;
      for (int e = 0; e < E; ++e)
        if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
      taken[best] = 1;
      in[j] = (uint32_t)best;
      sc[j] = p[best];
      chosen += p[best];
    }
    if (normalise)
      for (int j = 0; j < k; ++j) sc[j] /= chosen;
  }
}

}  // namespace bc_native
