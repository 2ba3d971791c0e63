// MLX side of ggml_decode.h: a GGUF tensor's blocks decoded straight into arrays MLX owns.
#pragma once

#include <cstdint>
#include <vector>

#include "mlx/array.h"

namespace bc_native {

namespace mx = mlx::core;

// `rows_shape` (e.g. {N} or {experts, N}) rows of K weights of GGML `type` at `src`
// (`src_bytes` long) as MLX's affine triple: [q uint32 (..., K * bits / 32), scales and
// biases float32 (..., K / group)], filled in place and handed to MLX without a copy.
std::vector<mx::array> ggml_to_affine_arrays(int type, const uint8_t* src, size_t src_bytes,
                                             const std::vector<int>& rows_shape, long K);

// N rows of K weights of GGML `type` straight into the packed layout (packed.h), output
// row n is source row order[n] (empty: row n). Most types: pack_quantized's [weights uint8
// (panels * 16, K * bits / 8), scales and biases float32 (panels, K / group, 16)], the same
// arrays pack_quantized gives for ggml_to_affine_arrays' triple, with no affine copy. Q4_K,
// Q5_K and Q6_K: their own forms (ggml_packed_form; the arrays' shapes and dtypes in packed.h).
std::vector<mx::array> ggml_to_packed_arrays(int type, const uint8_t* src, size_t src_bytes,
                                             long N, long K, const std::vector<int>& order);

}  // namespace bc_native
