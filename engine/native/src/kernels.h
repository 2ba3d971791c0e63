// Quantized matrix-vector kernels on MLX's affine layout, free of MLX headers so they
// compile fast and can be tested on their own.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace bc_native {

enum class ScaleType : int { f32 = 0, f16 = 1, bf16 = 2 };

struct QmvArgs {
  const float* x;         // (M, K) row-major
  const uint32_t* w;      // (N, K * bits / 32) packed, element j of a word at bits j*bits
  const void* scales;     // (N, K / group_size), ScaleType
  const void* biases;     // same shape and type as scales
  float* y;               // (M, N) row-major
  int M, N, K, group_size, bits;
  ScaleType stype;
  // Set by qmv_run for the 4-bit AVX2 kernel: x with each 32-block's even elements first,
  // then its odd ones (the order the nibbles unpack in), and x summed per group (M, K / gs).
  const float* xp = nullptr;
  const float* xs = nullptr;
  // int8 activations (qmv_run with int8_x): x quantized per 32-block in the same order as
  // xp, (M, K) int8, with one float step per block (M, K / 32); xs is set as well.
  const int8_t* xq = nullptr;
  const float* xd = nullptr;
};

// Scale or bias i of an array of type t as a float (IEEE half and bfloat16 converted).
float load_scale(const void* p, size_t i, ScaleType t);

// y = x @ (scales * q + biases).T. force_scalar skips the AVX2 path (tests, old CPUs).
// int8_x: x is rounded to int8 per 32-block (step max|x| / 127) and the products are
// integer dot products, as llama.cpp's Q4_1 x Q8_1; not exact (see docs/kernels.md).
void qmv_run(const QmvArgs& a, bool force_scalar, bool int8_x = false);

// qmv_run for several weights that share x (the same M, K, layout): x is prepared once and
// all their rows are one job for the threads.
void qmv_run_many(const std::vector<QmvArgs>& parts, bool force_scalar, bool int8_x = false);

// x quantized as qmv_run's int8_x path does it: q (M, K) in the kernel's order for `bits`
// (4: each 32-block's even elements, then its odd ones; 8: as given), d (M, K / 32).
void quantize_x_int8(const float* x, int M, int K, int bits, int8_t* q, float* d);

// x (M, K) rounded as quantize_x_int8 does for 8-bit (x's own order), plus xs (M, K / gs):
// each group's sum of x' (the rounded x, step-weighted), for the bias term. Rows in parallel.
void quantize_rows_int8(const float* x, int M, int K, int group_size, bool force_scalar,
                        int8_t* q, float* d, float* xs);

// Whether the AVX-512 VNNI kernels run here (the CPU has them and BATCHCHAT_NATIVE_AVX512
// is not "0").
bool avx512_vnni_enabled();

// y (N, K) = scales * q + biases in float32 (x and M unused).
void dequantize_run(const QmvArgs& a, bool force_scalar);

// True when this CPU can run the AVX2/FMA/F16C path.
bool cpu_has_avx2_fma();

// Run fn(0) .. fn(chunks - 1) on the shared threads (the caller takes part); serially when
// `work` (multiply-adds) is too small to pay for waking a thread.
void parallel_chunks(int chunks, long work, const std::function<void(int)>& fn);

// Threads used for one call (the calling thread included).
int qmv_threads();
void set_qmv_threads(int n);
// How an idle helper waits for the next job: `spins` pause loops, then `yields` yields of
// its core, then it sleeps until woken.
void set_qmv_wait(int spins, int yields);

}  // namespace bc_native
