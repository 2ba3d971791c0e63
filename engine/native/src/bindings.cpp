// Python module engine.native._qmv (nanobind, MLX's type domain so mx.array passes through).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/variant.h>

#include <cstring>
#include <stdexcept>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "attention_op.h"
#include "float_matmul_op.h"
#include "ggml_decode.h"
#include "ggml_decode_op.h"
#include "gelu_op.h"
#include "softcap_op.h"
#include "kernels.h"
#include "moe_route_op.h"
#include "packed.h"
#include "packed_op.h"
#include "qmv.h"
#include "rowwise_op.h"
#include "kv_pack_op.h"
#include "kv_write_op.h"
#include "sample_op.h"

namespace nb = nanobind;
using namespace nb::literals;

NB_MODULE(_qmv, m) {
  m.doc() = "BatchChat CPU kernels for MLX affine-quantized weights";
  m.def("quantized_matvec", &bc_native::quantized_matvec, "x"_a, "w"_a, "scales"_a,
        "biases"_a, "group_size"_a, "bits"_a, nb::kw_only(), "force_scalar"_a = false,
        "int8_x"_a = false, "stream"_a = nb::none(),
        "x @ dequantize(w, scales, biases).T on the CPU; x has any number of rows "
        "(int8_x: x rounded to int8 per 32-block, integer dot products).");
  m.def("quantized_matvec_many", &bc_native::quantized_matvec_many, "x"_a, "weights"_a,
        "group_size"_a, "bits"_a, nb::kw_only(), "force_scalar"_a = false, "int8_x"_a = false,
        "stream"_a = nb::none(),
        "quantized_matvec for several (w, scales, biases) sharing x, in one op: a list of "
        "outputs.");
  m.def("pack_quantized", &bc_native::pack_quantized, "w"_a, "scales"_a, "biases"_a,
        "group_size"_a, "bits"_a,
        "(w, scales, biases) in the packed layout of packed_matvec_many: [weights, scales, "
        "biases] (a copy; evaluates its inputs).");
  m.def("packed_matvec_many", &bc_native::packed_matvec_many, "x"_a, "packed"_a, "ns"_a,
        "group_size"_a, "bits"_a, nb::kw_only(), "force_scalar"_a = false, "form"_a = 0,
        "layouts"_a = std::vector<int>{}, "stream"_a = nb::none(),
        "x @ W.T for each packed weight, x rounded to int8 per 32-block: the same arithmetic "
        "for any number of rows, on every CPU path.");
  m.def("pack_experts", &bc_native::pack_experts, "w"_a, "scales"_a, "biases"_a,
        "group_size"_a, "bits"_a,
        "Stacked experts (E, N, ...) in pack_quantized's layout, one expert after another.");
  m.def("packed_experts_matvec", &bc_native::packed_experts_matvec, "x"_a, "indices"_a,
        "packed"_a, "ns"_a, "experts"_a, "group_size"_a, "bits"_a, nb::kw_only(),
        "force_scalar"_a = false, "form"_a = 0, "out"_a = 0, "slot_weights"_a = nb::none(),
        "stream"_a = nb::none(),
        "(M, k, N) per packed experts weight: each (row, slot) pair times its expert's "
        "weight, the pairs run grouped by expert, each with the bits of its row alone "
        "(out 1: silu(gate) * up of two; out 2: (M, N), the slots summed by slot_weights).");
  m.def("moe_route", &bc_native::moe_route, "logits"_a, "k"_a, "normalise"_a, nb::kw_only(),
        "stream"_a = nb::none(),
        "A MoE block's routing of float32 logits (..., E): (inds uint32, scores float32) "
        "(..., k), softmax's k largest (normalised by their sum when asked), in one op.");
  m.def("packed_kernel", &bc_native::packed_kernel_name, "force_scalar"_a = false,
        "Which packed kernel runs here: avx512-vnni, avx2 or portable.");
  m.def("dequantize_f32", &bc_native::dequantize_f32, "w"_a, "scales"_a, "biases"_a,
        "group_size"_a, "bits"_a, nb::kw_only(), "force_scalar"_a = false,
        "stream"_a = nb::none(), "scales * q + biases as a float32 (N, K) array, on the CPU.");
  m.def("cache_attention", &bc_native::cache_attention, "q"_a, "k"_a, "v"_a, "mask"_a,
        "scale"_a, "mask_kind"_a, nb::kw_only(), "force_scalar"_a = false,
        "tiled_from"_a = -1, "softcap"_a = 0.f, "sinks"_a, "kv_bits"_a = 0,
        "kv_group"_a = 0, "stream"_a = nb::none(),
        "softmax(scale * q @ k.T + mask) @ v over a KV cache, on the CPU (tiled for long "
        "queries from tiled_from positions; -1 default, 0 never).");
  m.def("cache_attention_rows", &bc_native::cache_attention_rows, "q"_a, "ks"_a, "vs"_a,
        "mask"_a, "scale"_a, "mask_kind"_a, nb::kw_only(), "force_scalar"_a = false,
        "tiled_from"_a = -1, "softcap"_a = 0.f, "sinks"_a, "kv_bits"_a = 0,
        "kv_group"_a = 0, "stream"_a = nb::none(),
        "cache_attention with each batch row's keys and values in arrays of their own "
        "(1, Hkv, T_row, D), read in place.");
  m.def("rope", &bc_native::rope, "x"_a, "dims"_a, "traditional"_a, "scale"_a, "offset"_a,
        "inv_freq"_a, nb::kw_only(), "stream"_a = nb::none(),
        "mx.fast.rope's forward rotation for float32 x, on the CPU.");
  m.def("rms_norm", &bc_native::rms_norm, "x"_a, "weight"_a, "eps"_a, nb::kw_only(),
        "force_scalar"_a = false, "stream"_a = nb::none(),
        "mx.fast.rms_norm for float32 x, on the CPU (weight: a 0-size array for none).");
  m.def("silu_mul", &bc_native::silu_mul, "gate"_a, "up"_a, nb::kw_only(),
        "force_scalar"_a = false, "stream"_a = nb::none(),
        "silu(gate) * up for float32 arrays, on the CPU.");
  m.def("softcap", &bc_native::softcap, "x"_a, "cap"_a, nb::kw_only(), "force_scalar"_a = false,
        "stream"_a = nb::none(), "cap * tanh(x / cap) for a float32 array, on the CPU.");
  m.def("gelu_tanh_mul", &bc_native::gelu_tanh_mul, "gate"_a, "up"_a, nb::kw_only(),
        "force_scalar"_a = false, "stream"_a = nb::none(),
        "nn.gelu_approx(gate) * up for float32 arrays, on the CPU.");
  m.def("float_matmul", &bc_native::float_matmul, "x"_a, "w"_a, nb::kw_only(),
        "force_scalar"_a = false, "stream"_a = nb::none(),
        "x @ w.T for float32 x (..., K) and w (N, K), on the CPU, each output summed in one "
        "order whatever the number of rows.");
  m.def("sample_tokens", &bc_native::sample_tokens, "logits"_a, "u"_a, "params"_a,
        nb::kw_only(), "penalty_at"_a = nb::none(), "penalty"_a = nb::none(),
        "pending"_a = nb::none(), "stream"_a = nb::none(),
        "One token per row: mlx-lm's top-p, min-p and top-k filters, then the token where "
        "the cumulative probability at the row's temperature first exceeds u; with penalty_at "
        "(B, W) int32 and penalty (B,), mlx-lm's repetition penalty first (-1: pending).");
  m.def("kv_pack", &bc_native::kv_pack, "x"_a, "bits"_a, "group"_a, nb::kw_only(),
        "turn"_a = false, "stream"_a = nb::none(),
        "float32 rows (..., D) -> (..., width) uint8: mx.quantize's words, scales and biases "
        "laid end to end, bit for bit.");
  m.def("kv_write", &bc_native::kv_write, "buffer"_a, "update"_a, "lengths"_a, nb::kw_only(),
        "stream"_a = nb::none(),
        "buffer (B, H, T, D) with update (n, H, S, D) written at each row's own length.");
  m.def("kv_write_columns", &bc_native::kv_write_columns, "arena"_a, "update"_a, "columns"_a,
        nb::kw_only(), "stream"_a = nb::none(),
        "arena (1, H, C, D) with update (n, H, S, D): row b written at columns[b].");
  m.def(
      "ggml_to_affine",
      [](int type, nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu> src, long rows,
         long K, nb::ndarray<uint8_t, nb::c_contig, nb::device::cpu> w,
         nb::ndarray<float, nb::c_contig, nb::device::cpu> scales,
         nb::ndarray<float, nb::c_contig, nb::device::cpu> biases) {
        int group = 0, bits = 0;
        const long row = bc_native::ggml_row_bytes(type, K);
        if (!bc_native::ggml_affine_form(type, &group, &bits) || row == 0)
          throw std::invalid_argument("ggml_to_affine: not a type this decodes, or K is not "
                                      "a whole number of its blocks");
        if ((long)src.nbytes() < rows * row || (long)w.nbytes() < rows * K * bits / 8 ||
            (long)scales.size() < rows * (K / group) || (long)biases.size() < rows * (K / group))
          throw std::invalid_argument("ggml_to_affine: an array is too small");
        nb::gil_scoped_release unlocked;
        bc_native::ggml_to_affine(type, src.data(), rows, K, w.data(), scales.data(),
                                  biases.data());
      },
      "type"_a, "src"_a, "rows"_a, "K"_a, "w"_a, "scales"_a, "biases"_a,
      "GGML blocks (a GGUF tensor's bytes) into MLX's affine layout: packed q, float32 "
      "scales and biases (numpy arrays, filled in place).");
  m.def(
      "ggml_to_affine_arrays",
      [](int type, nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu> src,
         std::vector<int> rows_shape, long K) {
        const uint8_t* data = src.data();
        const size_t n = src.nbytes();
        nb::gil_scoped_release unlocked;
        return bc_native::ggml_to_affine_arrays(type, data, n, rows_shape, K);
      },
      "type"_a, "src"_a, "rows_shape"_a, "K"_a,
      "GGML blocks (a GGUF tensor's bytes) as MLX's affine triple [q uint32, scales, biases "
      "float32], decoded into arrays MLX owns (no copy).");
  m.def(
      "ggml_to_packed_arrays",
      [](int type, nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu> src, long N, long K,
         std::vector<int> order) {
        const uint8_t* data = src.data();
        const size_t n = src.nbytes();
        nb::gil_scoped_release unlocked;
        return bc_native::ggml_to_packed_arrays(type, data, n, N, K, order);
      },
      "type"_a, "src"_a, "N"_a, "K"_a, "order"_a = std::vector<int>(),
      "GGML blocks (a GGUF tensor's N x K weights) straight into the packed layout "
      "[weights, scales, biases] (Q4_K, Q5_K, Q6_K, Q4_0, Q8_0, Q5_0, Q5_1, Q4_1: their own "
      "forms, ggml_packed_form); output "
      "row n is source row order[n] (empty: n).");
  m.def("ggml_packed_form", &bc_native::ggml_packed_form, "type"_a,
        "The packed form a GGML type decodes into: 0 affine, 1 Q4_K's, 2 Q6_K's, 3 Q5_K's, "
        "4 Q4_0's, 5 Q8_0's, 6 Q5_0's, 7 Q5_1's, 8 Q4_1's.");
  m.def(
      "ggml_to_packed_many",
      [](std::vector<std::tuple<int, nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu>,
                                long, long, std::vector<int>>>
             jobs) {
        // A model's tensors in one call, all of it without the GIL: the loader builds the
        // tokenizer in Python meanwhile (a call a tensor waited for the GIL between them).
        struct Job {
          int type;
          const uint8_t* src;
          size_t bytes;
          long N, K;
          const std::vector<int>* order;
        };
        std::vector<Job> todo;
        for (auto& [type, src, N, K, order] : jobs)
          todo.push_back({type, src.data(), src.nbytes(), N, K, &order});
        std::vector<std::vector<bc_native::mx::array>> out;
        nb::gil_scoped_release unlocked;
        for (const Job& j : todo)
          out.push_back(bc_native::ggml_to_packed_arrays(j.type, j.src, j.bytes, j.N, j.K,
                                                         *j.order));
        return out;
      },
      "jobs"_a,
      "ggml_to_packed_arrays for each (type, src, N, K, order) job, in one call that lets go "
      "of the GIL for all of them.");
  m.def(
      "gguf_string_spans",
      [](nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu> buf, size_t pos,
         size_t count, nb::ndarray<int64_t, nb::c_contig, nb::device::cpu> spans) -> long {
        // GGUF's string array: count x (uint64 length, bytes); a Python loop over a 152k
        // vocabulary's lengths was ~1 s of a load.
        if (spans.size() < 2 * count) throw std::invalid_argument("gguf_string_spans: spans");
        const uint8_t* b = buf.data();
        const size_t n = buf.nbytes();
        int64_t* out = spans.data();
        for (size_t i = 0; i < count; ++i) {
          if (pos + 8 > n) return -1;
          uint64_t len;
          std::memcpy(&len, b + pos, 8);
          if (len > n - pos - 8) return -1;
          out[2 * i] = (int64_t)(pos + 8);
          out[2 * i + 1] = (int64_t)len;
          pos += 8 + len;
        }
        return (long)pos;
      },
      "buf"_a, "pos"_a, "count"_a, "spans"_a,
      "Where each string of a GGUF string array (count strings from byte pos) starts and "
      "how long it is, into spans (count x 2 int64); the end position, or -1 when the "
      "array runs past the buffer.");
  m.def("cpu_has_avx2_fma", &bc_native::cpu_has_avx2_fma);
  m.def("threads", &bc_native::qmv_threads);
  m.def("set_threads", &bc_native::set_qmv_threads, "n"_a);
  m.def("set_wait", &bc_native::set_qmv_wait, "spins"_a, "yields"_a);
}
