// Row-wise ops of a transformer layer that MLX's CPU backend composes from many small ops
// (mx.fast.rope, mx.fast.rms_norm and SiLU x up are each 5-15 ops there, ~30-130 us a call
// at decode, most of it per-op overhead), free of MLX headers.
#pragma once

#include <cstdint>

namespace bc_native {

struct RopeArgs {
  const float* x;        // (B, H, T, D), strides xs in elements (the last one is 1): the
  int64_t xs[3];         // queries/keys arrive as a transposed view of the projection
  float* out;            // (B, H, T, D) row-major
  const int32_t* offset; // B offsets, or one (n_offsets == 1) for every row
  int n_offsets;
  const float* inv_freq; // dims / 2 frequencies (position * inv_freq = angle)
  int B, H, T, D, dims;
  float scale;           // positions are scaled by this
  bool traditional;      // rotate (2i, 2i + 1) pairs, else (i, i + dims / 2)
};

// mx.fast.rope's forward rotation: angle = (offset + t) * scale * inv_freq[i]; features
// from `dims` on are copied.
void rope_run(const RopeArgs& a);

// y = (x * rsqrt(mean(x^2) + eps)) * w over rows of length n (w may be null: no weight).
void rms_norm_run(const float* x, const float* w, float* y, int64_t rows, int n, float eps,
                  bool force_scalar);

// y = silu(g) * u = g * u / (1 + exp(-g)), elementwise.
void silu_mul_run(const float* g, const float* u, float* y, int64_t size, bool force_scalar);

}  // namespace bc_native
