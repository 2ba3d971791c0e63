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
//
// GGUF's K-quants held near their file's width (issue #48), each a form of its own whose
// scales and biases the kernel forms from the file's parts, in float32, as gguf-py and
// ggml_decode.cpp do (so the arithmetic above, and every output bit, is the affine form's):
// - kQ4K (Q4_K, groups of 32, 4-bit values as above): the file's own 12 bytes of 6-bit
//   sub-scale sc and minimum m a row's super-block and its fp16 d and dmin, laid out by lane
//   ("scales": uint8 (panels, K / 256, 256); "biases": none, (panels, 0, 16)). Per (panel,
//   256-block), 256 bytes: byte 16g + n holds group g's (g = 0-7) low 4 bits of sc (bits
//   0-3) and of m (bits 4-7) for lane n; bytes 128 + 4n .. 131 + 4n a little-endian uint32
//   with, for each g, sc's high 2 bits in bits 4g, 4g + 1 and m's in 4g + 2, 4g + 3; bytes
//   192 + 2n the fp16 d of lane n and 224 + 2n its dmin (the file's bytes). scale = d * sc,
//   bias = -(dmin * m). 4.5 bits a weight (the file's; issue #48: was 4.75 with float32 d
//   and dmin and a byte a sub-scale).
// - kQ6K (Q6_K, groups of 16, 6-bit values q in [0, 63]): per (panel, 32-block) the 4-bit
//   layout above for the low nibbles (256 bytes) then 2 x 64 bytes of high bit pairs, byte
//   4n + i of the h-th holding, in bits 2t and 2t + 1, the high bits of the value whose
//   nibble sits in step j = 2h + t / 2, low (t even) or high (t odd) nibble. Its scales
//   ("scales": int8 (panels, K / 256, 288); "biases": none, (panels, 0, 16)): per (panel,
//   256-block) the int8 sc of group g (0-15) and lane n at byte 16g + n, then the file's fp16
//   d of lane n at bytes 256 + 2n; scale = d * sc, bias = scale * -32. 6.5625 bits a weight
//   (the file's; was 6.625 with a float32 d).
// - kQ5K (Q5_K, as kQ4K with 5-bit values; its scales as kQ4K's): per (panel, 32-block) the
//   4-bit layout of the low nibbles then 64 bytes of high bits, byte 4n + i holding in bit t
//   the high bit of the value whose nibble sits in step j = t / 2, low (t even) or high (t
//   odd) nibble. 5.5 bits a weight (the file's).
// GGUF's Q4_0 and Q8_0 scale-only (issue #48 (3): a MoE decode step reads each routed
// expert's bytes, so bytes are its time): the file's fp16 d per (panel, 32-block, lane)
// ("scales": float16 (panels, K / 32, 16); "biases": none, (panels, 0, 16)), values as the
// affine form holds them (Q4_0: q in [0, 15], the 4-bit layout; Q8_0: q + 128, the 8-bit
// one); scale = d (exact in float32), bias = d * -8 (kQ40) or d * -128 (kQ80), exact too:
// the affine form's very numbers, so every output bit is its. 4.5 and 8.5 bits a weight
// (the file's) against the affine form's 6 and 10.
// GGUF's Q5_0, Q5_1 and Q4_1 at their file's width (issue #48: llama.cpp's Q4_K_M / Q5_K_M
// write a tensor whose rows are not whole 256-blocks in Q5_0 / Q5_1, llama-quant.cpp's
// fallback, e.g. SmolLM2's and Gemma 3's MLPs; the bundled model is Q4_1): values in the
// 5-bit layout of kQ5K (Q5_0, Q5_1: q in [0, 31]) or the 4-bit one (Q4_1), with
// - kQ50: the file's fp16 d as kQ40 holds it; bias = d * -16, exact. 5.5 bits a weight.
// - kQ51, kQ41: the file's fp16 d and m per (panel, 32-block): "scales" float16 (panels,
//   K / 32, 32), lane n's d at 32b + n and its m at 32b + 16 + n (b the 32-block); biases
//   none, (panels, 0, 16). scale = d, bias = m (fp16, exact in float32: the affine form's
//   numbers). 6.0 and 5.0 bits a weight (the file's) against the affine form's 10 and 6.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels.h"

namespace bc_native {

constexpr int kPanel = 16;
constexpr int kSuper = 256;  // a K-quant's super-block: the weights one d (and dmin) covers
constexpr int kSuperScaleBytes = 256;  // kQ4K / kQ5K: a (panel, 256-block)'s scales (above)
constexpr int kSuperScaleBytes6 = 288;  // kQ6K: a (panel, 256-block)'s scales (above)

// The packed forms (above): MLX's affine scales and biases, or a K-quant's own parts.
enum Form : int {
  kAffine = 0, kQ4K = 1, kQ6K = 2, kQ5K = 3, kQ40 = 4, kQ80 = 5, kQ50 = 6, kQ51 = 7, kQ41 = 8
};
// the file's fp16 d a 32-block alone (the bias a fixed multiple of it)
constexpr bool scale_only(int form) { return form == kQ40 || form == kQ80 || form == kQ50; }
// the file's fp16 d and m a 32-block (scale d, bias m)
constexpr bool scale_min(int form) { return form == kQ51 || form == kQ41; }
// a scale-only form's bias: d times this (exact in float32)
constexpr float scale_only_bias(int form) {
  return form == kQ40 ? -8.f : form == kQ50 ? -16.f : -128.f;
}

inline int panels(int N) { return (N + kPanel - 1) / kPanel; }
// The bytes of "scales" and the floats of "biases" one panel of a form holds.
inline size_t panel_scale_bytes(int form, int K, int group_size) {
  if (form == kQ4K || form == kQ5K) return (size_t)(K / kSuper) * kSuperScaleBytes;
  if (form == kQ6K) return (size_t)(K / kSuper) * kSuperScaleBytes6;
  if (scale_only(form)) return (size_t)(K / 32) * kPanel * 2;  // fp16
  if (scale_min(form)) return (size_t)(K / 32) * kPanel * 4;  // fp16 d and m
  return sizeof(float) * (K / group_size) * kPanel;
}
inline size_t panel_bias_count(int form, int K, int group_size) {
  if (form == kQ4K || form == kQ5K) return 0;  // d and dmin sit in the scales
  if (form == kQ6K) return 0;  // d sits in the scales
  if (scale_only(form) || scale_min(form)) return 0;
  return (size_t)(K / group_size) * kPanel;
}
// What a form's weights, group and bits must be (false: not a form).
inline bool form_layout(int form, int* group_size, int* bits) {
  if (form == kQ4K) { *group_size = 32; *bits = 4; return true; }
  if (form == kQ6K) { *group_size = 16; *bits = 6; return true; }
  if (form == kQ5K) { *group_size = 32; *bits = 5; return true; }
  if (form == kQ40) { *group_size = 32; *bits = 4; return true; }
  if (form == kQ80) { *group_size = 32; *bits = 8; return true; }
  if (form == kQ50 || form == kQ51) { *group_size = 32; *bits = 5; return true; }
  if (form == kQ41) { *group_size = 32; *bits = 4; return true; }
  return form == kAffine;
}
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

// One 32-block of a row given as 32 values (one byte each, below 2^bits; bits 4, 5, 6 or 8)
// into lane `ln` of the panel's block at `blk`.
void pack_block32(const uint8_t* q, int bits, int ln, uint8_t* blk);

// Zeroes the last panel where N is not a whole number of panels (its rows past N).
void clear_last_panel(int N, int K, int group_size, int bits, uint8_t* wp, void* sp,
                      float* bp, int form = kAffine);

struct PackedArgs {
  const uint8_t* w;
  const void* s;   // scales: float32 (kAffine), or the K-quant's sub-scales (bytes)
  const float* b;  // biases (kAffine), or the K-quant's super-block d (and dmin)
  float* y;  // (M, N) row-major
  int N, K, group_size, bits;
  int form = kAffine;
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
//
// `out` says what is handed back (issue #48 (3): a MoE block's small ops after the experts,
// each a pass over the pairs, done on the pairs' outputs before they leave):
// - kEachPair: each part's (M, k, N) outputs, as above;
// - kSwiGLU: two parts (gate, up) of one N: silu(gate) * up (silu_mul_run's arithmetic,
//   row by row) (M, k, N) into parts[0].y (parts[1].y unused);
// - kWeightedSum: one part: (M, N) into parts[0].y, row m = the sum over its slots j in
//   order of fma(slot_weights[m * k + j], pair (m, j), acc), acc from 0 (a pair without an
//   expert counts as zeros). Each is a function of the row's own pairs alone.
enum ExpertsOut : int { kEachPair = 0, kSwiGLU = 1, kWeightedSum = 2 };
void packed_run_experts(const float* x, int M, int X, int k, const uint32_t* idx, int E,
                        const std::vector<PackedArgs>& parts, bool force_scalar,
                        int out = kEachPair, const float* slot_weights = nullptr);

// Which kernel runs here: "avx512-vnni", "avx2" or "portable" (BATCHCHAT_NATIVE_AVX512=0
// skips the first).
const char* packed_kernel_name(bool force_scalar);

}  // namespace bc_native
