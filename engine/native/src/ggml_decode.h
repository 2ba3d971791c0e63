// GGML quantized blocks (a GGUF tensor's bytes) to MLX's affine layout, in one pass a row
// and rows in parallel: what engine/loader/ggml_types.py does in numpy, the same bits
// (tests/engine/test_ggml_types.py compares them), ~10x faster for a model's load. Free of
// MLX headers.
#pragma once

#include <cstdint>

namespace bc_native {

// The form of a GGML type (the numbers of gguf-py's GGMLQuantizationType): group 16 or 32,
// bits 4 or 8; false for a type this file does not decode.
bool ggml_affine_form(int type, int* group, int* bits);

// The bytes rows x K weights of `type` take in a GGUF (0 for a type not decoded here, or a
// K that is not a whole number of its blocks).
long ggml_row_bytes(int type, long K);

// rows x K weights of `type` at `src` (rows * K / block * type_size bytes) into `w` (MLX's
// packed q: rows x K * bits / 8 bytes), `scales` and `biases` (rows x K / group float32).
void ggml_to_affine(int type, const uint8_t* src, long rows, long K, uint8_t* w,
                    float* scales, float* biases);

// The packed form (packed.h's Form) `type` is decoded into: kQ4K, kQ5K, kQ6K for Q4_K, Q5_K,
// Q6_K (held near their file's width), kQ40, kQ80 and kQ50 for Q4_0, Q8_0 and Q5_0 (the
// file's fp16 scales), kQ51 and kQ41 for Q5_1 and Q4_1 (its fp16 scales and minimums),
// kAffine for the others.
int ggml_packed_form(int type);

// N rows of K weights of `type` straight into the packed layout of packed.h in the type's
// form (wp: packed_weight_bytes; sp: panel_scale_bytes and bp: panel_bias_count floats a
// panel): output row n is source row order[n] (order null: row n). kAffine: the same bits
// as ggml_to_affine followed by pack_weights, without the affine copy in between; a K form:
// the file's parts, whose scales and biases the kernel forms as ggml_to_affine does.
void ggml_to_packed(int type, const uint8_t* src, long N, long K, const int32_t* order,
                    uint8_t* wp, void* sp, float* bp);

}  // namespace bc_native
