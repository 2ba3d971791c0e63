// MLX custom primitive for float_matmul.h's x @ w.T (CPU only, float32).
#pragma once

#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace bc_native {

namespace mx = mlx::core;

// x (..., K) @ w (N, K).T -> (..., N), float32, each output's sum in one fixed order
// (float_matmul.h): a row's result does not depend on the other rows of x.
mx::array float_matmul(const mx::array& x, const mx::array& w, bool force_scalar = false,
                       mx::StreamOrDevice s = {});

class FloatMatmulOp : public mx::UnaryPrimitive {
 public:
  FloatMatmulOp(mx::Stream stream, bool force_scalar)
      : mx::UnaryPrimitive(stream), force_scalar_(force_scalar) {}

  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  void eval_gpu(const std::vector<mx::array>& inputs, mx::array& out) override;

  const char* name() const override { return "NativeFloatMatmul"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    return force_scalar_ == static_cast<const FloatMatmulOp&>(other).force_scalar_;
  }
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    auto shape = inputs[0].shape();
    shape.back() = inputs[1].shape(0);
    return {shape};
  }

 private:
  bool force_scalar_;
};

}  // namespace bc_native
