// Sampling one token per row from logits on the CPU, free of MLX headers: mlx-lm's filters
// (top-p, then min-p, then top-k, on the untempered distribution) and a draw at a
// temperature, without sorting the vocabulary (MLX's CPU sort of 49,152 logits made top-p
// cost ~7 ms a row).
#pragma once

#include <cstdint>

namespace bc_native {

struct SampleArgs {
  const float* logits;  // (B, V) row-major
  const float* u;       // (B,) uniform draws in [0, 1)
  const float* params;  // (B, 4): temperature (> 0), top_p (0 or 1: off), min_p, top_k (0: off)
  int32_t* out;         // (B,)
  int B, V;
};

// For each row: the tokens mlx-lm's make_sampler(temp, top_p, min_p, top_k) keeps, and the
// one where their cumulative probability at the temperature (in token-id order) first
// exceeds u times their total. Rows whose logits are all -inf give token 0.
void sample_run(const SampleArgs& a);

// The repetition penalty mlx-lm's processor applies (and engine.sampling.penalize_rows):
// `out` (B, V) = `logits`, then for each row b and column w, token t = at[b][w] (pending[b]
// where at < 0) gets v < 0 ? v * factor[b] : v / factor[b] of its logit v as given (a
// repeated t writes the same value; t outside [0, V) is skipped). Float32, as MLX's ops.
void penalize_copy(const float* logits, int B, int V, const int32_t* at, int W,
                   const float* factor, const int32_t* pending, float* out);

}  // namespace bc_native
