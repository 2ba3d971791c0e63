// x @ w.T for float32 weights with one arithmetic per output, whatever the number of rows
// (issue #25's batch invariance for unquantized linears: BLAS picks another kernel, and
// another summation order, for one row than for many).
#pragma once

#include <cstdint>

namespace bc_native {

// y (M, N) = x (M, K) @ w (N, K).T, all float32 and row-major. Each output is the same
// sum whatever M is, which rows share the call, the threads or the SIMD path: 8 lanes,
// lane j summing x[k] * w[k] for k = j mod 8 in order with one fma each (a short last
// step's missing lanes fma 0 * 0), then ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
void float_matmul_run(const float* x, const float* w, float* y, int64_t M, int64_t N,
                      int64_t K, bool force_scalar);

}  // namespace bc_native
