// Quantized linears on a packed copy of the weights, with int8 activations, for every row
// count: one decode row, a batch, a 2,048-token prompt chunk (issue #25: one arithmetic
// whatever shares the pass). Free of MLX headers.
//
// Layout: output rows in panels of 16, the panel's 16 rows side by side in the vector
// lanes. Per panel and 32-block of K: 4-bit, 4 x 64 bytes, byte 4n + i of the j-th holding
// q[n][8j + i] in its low nibble and q[n][8j + 4 + i] in its high one; 8-bit, 8 x 64 bytes,
// byte 4n + i of the j-th = q[n][4j + i]. Scales and biases as float32, 16 per (panel,
// group). Rows past N are zero.
//
// Arithmetic of output (m, n), the same on every path (AVX-512 VNNI, AVX2, portable):
// x's row rounded to int8 per 32-block (step d = max|x| / 127); for each block b in order,
// the exact integer sum I_b = sum q * x', then acc = fma(I_b, s_g * d_b, acc); then for each
// group g in order acc = fma(bias_g, d-weighted sum of x'_g, acc). No horizontal sums.
// Groups of 16 (GGUF's Q6_K, Q2_K): each half of a block is a sum I of its own, fma'd with
// its own group's scale, first half first; the bias term sums x' per 16.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels.h"

namespace bc_native {

constexpr int kPanel = 16;

inline int panels(int N) { return (N + kPanel - 1) / kPanel; }
inline size_t packed_weight_bytes(int N, int K, int bits) {
  return (size_t)panels(N) * kPanel * K * bits / 8;
}
inline size_t packed_scale_count(int N, int K, int group_size) {
  return (size_t)panels(N) * kPanel * (K / group_size);
}

// MLX's affine layout (a.w, a.scales, a.biases, a.N, a.K, a.group_size, a.bits, a.stype) into
// the packed one: wp packed_weight_bytes, sp and bp packed_scale_count floats.
void pack_weights(const QmvArgs& a, uint8_t* wp, float* sp, float* bp);

// One row in MLX's affine layout (q packed, K * bits / 8 bytes) into lane `ln` (0-15) of a
// panel's weights (`panel`: the panel's first byte).
void pack_row(const uint8_t* row, int K, int bits, int ln, uint8_t* panel);

// One 32-block of a row given as 32 values (one byte each, below 2^bits) into lane `ln` of
// the panel's block at `blk`.
void pack_block32(const uint8_t* q, int bits, int ln, uint8_t* blk);

// Zeroes the last panel where N is not a whole number of panels (its rows past N).
void clear_last_panel(int N, int K, int group_size, int bits, uint8_t* wp, float* sp,
                      float* bp);

struct PackedArgs {
  const uint8_t* w;
  const float* s;
  const float* b;
  float* y;  // (M, N) row-major
  int N, K, group_size, bits;
};

// y = x @ W.T for each part (all with x's K and group size); x (M, K) float32.
void packed_run_many(const float* x, int M, const std::vector<PackedArgs>& parts,
                     bool force_scalar);

// A decode batch's rows routed to experts (MoE), grouped by expert. Each part holds E
// experts' weights stacked, each expert packed as pack_weights packs one matrix (expert e's
// panels right after expert e-1's); its w, s, b point at expert 0 and its y at the output
// (M, k, N). Output (m, j) = x row (m, X == 1 ? 0 : j) @ W[idx[m * k + j]].T, x (M, X, K).
// The (row, expert) pairs are sorted by expert (stable), and each expert's rows run as one
// packed product of their own: a pair's arithmetic is the one packed_run_many gives that
// row alone (packed.h's, which depends on nothing but the row), whatever rows share its
// expert. Pairs whose expert is out of range get zeros.
void packed_run_experts(const float* x, int M, int X, int k, const uint32_t* idx, int E,
                        const std::vector<PackedArgs>& parts, bool force_scalar);

// Which kernel runs here: "avx512-vnni", "avx2" or "portable" (BATCHCHAT_NATIVE_AVX512=0
// skips the first).
const char* packed_kernel_name(bool force_scalar);

}  // namespace bc_native
