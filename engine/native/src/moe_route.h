// A MoE block's routing in one pass a row (issue #48 (3)): what mlx-lm's Qwen 3 MoE block
// does in five MLX ops (softmax, argpartition, take, sum, divide). Free of MLX headers.
#pragma once

#include <cstdint>

namespace bc_native {

// For each of M rows of E logits: p = softmax (max subtracted, std::exp, the sum in index
// order, each divided by it), the k largest p (largest first, the lower index first on a
// tie) into inds (M, k) and their p into scores (M, k), divided by their sum (in slot order)
// when `normalise`. A row's outputs depend on its logits alone.
void moe_route_run(const float* logits, int64_t M, int E, int k, bool normalise,
                   uint32_t* inds, float* scores);

}  // namespace bc_native
