// MLX custom primitive for gelu.h's GELU-tanh x up (CPU only, float32).
#pragma once

#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace bc_native {

namespace mx = mlx::core;

// nn.gelu_approx(gate) * up for float32 arrays of one shape, in one op.
mx::array gelu_tanh_mul(const mx::array& gate, const mx::array& up, bool force_scalar = false,
                        mx::StreamOrDevice s = {});

class GeluMulOp : public mx::UnaryPrimitive {
 public:
  GeluMulOp(mx::Stream stream, bool force_scalar)
      : mx::UnaryPrimitive(stream), force_scalar_(force_scalar) {}

  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  void eval_gpu(const std::vector<mx::array>& inputs, mx::array& out) override;

  const char* name() const override { return "NativeGeluTanhMul"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    return force_scalar_ == static_cast<const GeluMulOp&>(other).force_scalar_;
  }
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  bool force_scalar_;
};

}  // namespace bc_native
