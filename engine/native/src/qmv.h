// MLX custom primitive: quantized matrix times a few rows of float32, CPU only.
#pragma once

#include <string>

#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace bc_native {

namespace mx = mlx::core;

// Raises std::invalid_argument ("<who>: ...") unless (w, scales, biases) is mx.quantize's
// affine output with bits 4 or 8 and group 32 or 64 (also 16 when `packed`: the packed
// kernel's groups of 16), scales float32/16 or bfloat16.
void check_weights(const mx::array& w, const mx::array& scales, const mx::array& biases,
                   int group_size, int bits, const std::string& who, bool packed = false);

// y = x @ (scales * q + biases).T for w, scales, biases from mx.quantize(W, group_size,
// bits) (affine mode). x: (..., K), any float dtype (computed in float32); y: (..., N).
mx::array quantized_matvec(const mx::array& x, const mx::array& w, const mx::array& scales,
                           const mx::array& biases, int group_size, int bits,
                           bool force_scalar = false, bool int8_x = false,
                           mx::StreamOrDevice s = {});

// The same for several weights that share x (a layer's q/k/v or gate/up projections) in
// one op: x is prepared once and the rows of all of them are one job for the threads.
// weights: (w, scales, biases) per matrix, all with x's K, the same layout and scale dtype.
std::vector<mx::array> quantized_matvec_many(const mx::array& x,
                                             const std::vector<mx::array>& weights,
                                             int group_size, int bits, bool force_scalar = false,
                                             bool int8_x = false, mx::StreamOrDevice s = {});

// dequantize(w, scales, biases) as float32 (N, K): MLX's CPU dequantize is slow enough
// (~1.5 ms for 576x576) that dequantize + BLAS matmul lost to everything for prefill.
mx::array dequantize_f32(const mx::array& w, const mx::array& scales, const mx::array& biases,
                         int group_size, int bits, bool force_scalar = false,
                         mx::StreamOrDevice s = {});

// One output per weight matrix (inputs: x, then w, scales, biases per matrix), or with
// dequant_only one float32 weight (inputs: w, scales, biases).
class QuantizedMatvec : public mx::Primitive {
 public:
  // dequant_only: inputs are (w, scales, biases) and the output is the float32 weight.
  // int8_x: x rounded to int8 per 32-block, integer dot products (kernels.h).
  QuantizedMatvec(mx::Stream stream, int group_size, int bits, bool force_scalar,
                  bool dequant_only = false, bool int8_x = false)
      : mx::Primitive(stream),
        group_size_(group_size),
        bits_(bits),
        force_scalar_(force_scalar),
        dequant_only_(dequant_only),
        int8_x_(int8_x) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;

  const char* name() const override {
    return dequant_only_ ? "NativeDequantize" : "QuantizedMatvec";
  }
  bool is_equivalent(const mx::Primitive& other) const override;
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override;

 private:
  int group_size_;
  int bits_;
  bool force_scalar_;
  bool dequant_only_;
  bool int8_x_;
};

}  // namespace bc_native
