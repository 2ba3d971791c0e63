// MLX side of packed.h: packing a quantized weight once, and the packed int8 product of x
// with one or more packed weights as one CPU primitive.
#pragma once

#include <vector>

#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace bc_native {

namespace mx = mlx::core;

// (w, scales, biases) from mx.quantize (affine, bits 4 or 8, group 32 or 64) in the packed
// layout: [weights uint8 (panels * 16, K * bits / 8), scales and biases float32 (panels,
// K / group_size, 16)]. Evaluates its inputs; the result is a copy (the originals stay).
std::vector<mx::array> pack_quantized(const mx::array& w, const mx::array& scales,
                                      const mx::array& biases, int group_size, int bits);

// x @ W_i.T for each packed (weights, scales, biases) in `packed`, N_i = ns[i] outputs, in
// one op: x (..., K) rounded to int8 once. Outputs float32 (..., N_i), x's dtype if other.
std::vector<mx::array> packed_matvec_many(const mx::array& x, const std::vector<mx::array>& packed,
                                          const std::vector<int>& ns, int group_size, int bits,
                                          bool force_scalar = false, mx::StreamOrDevice s = {});

class PackedMatvec : public mx::Primitive {
 public:
  PackedMatvec(mx::Stream stream, std::vector<int> ns, int group_size, int bits,
               bool force_scalar)
      : mx::Primitive(stream),
        ns_(std::move(ns)),
        group_size_(group_size),
        bits_(bits),
        force_scalar_(force_scalar) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  const char* name() const override { return "PackedMatvec"; }
  bool is_equivalent(const mx::Primitive& other) const override;
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override;

 private:
  std::vector<int> ns_;
  int group_size_;
  int bits_;
  bool force_scalar_;
};

}  // namespace bc_native
