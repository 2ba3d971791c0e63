// Python module engine.native._qmv (nanobind, MLX's type domain so mx.array passes through).
#include <nanobind/nanobind.h>
#include <nanobind/stl/variant.h>

#include "attention_op.h"
#include "kernels.h"
#include "qmv.h"

namespace nb = nanobind;
using namespace nb::literals;

NB_MODULE(_qmv, m) {
  m.doc() = "BatchChat CPU kernels for MLX affine-quantized weights";
  m.def("quantized_matvec", &bc_native::quantized_matvec, "x"_a, "w"_a, "scales"_a,
        "biases"_a, "group_size"_a, "bits"_a, nb::kw_only(), "force_scalar"_a = false,
        "stream"_a = nb::none(),
        "x @ dequantize(w, scales, biases).T on the CPU; x has any number of rows.");
  m.def("dequantize_f32", &bc_native::dequantize_f32, "w"_a, "scales"_a, "biases"_a,
        "group_size"_a, "bits"_a, nb::kw_only(), "force_scalar"_a = false,
        "stream"_a = nb::none(), "scales * q + biases as a float32 (N, K) array, on the CPU.");
  m.def("cache_attention", &bc_native::cache_attention, "q"_a, "k"_a, "v"_a, "mask"_a,
        "scale"_a, "mask_kind"_a, nb::kw_only(), "force_scalar"_a = false,
        "tiled_from"_a = -1, "stream"_a = nb::none(),
        "softmax(scale * q @ k.T + mask) @ v over a KV cache, on the CPU (tiled for long "
        "queries from tiled_from positions; -1 default, 0 never).");
  m.def("cpu_has_avx2_fma", &bc_native::cpu_has_avx2_fma);
  m.def("threads", &bc_native::qmv_threads);
  m.def("set_threads", &bc_native::set_qmv_threads, "n"_a);
}
