// MLX custom primitive for softcap.h's cap * tanh(x / cap) (CPU only, float32).
#pragma once

#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace bc_native {

namespace mx = mlx::core;

// cap * tanh(x / cap) for a float32 array, in one op.
mx::array softcap(const mx::array& x, float cap, bool force_scalar = false,
                  mx::StreamOrDevice s = {});

class SoftcapOp : public mx::UnaryPrimitive {
 public:
  SoftcapOp(mx::Stream stream, float cap, bool force_scalar)
      : mx::UnaryPrimitive(stream), cap_(cap), force_scalar_(force_scalar) {}

  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  void eval_gpu(const std::vector<mx::array>& inputs, mx::array& out) override;

  const char* name() const override { return "NativeSoftcap"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    auto& o = static_cast<const SoftcapOp&>(other);
    return cap_ == o.cap_ && force_scalar_ == o.force_scalar_;
  }
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  float cap_;
  bool force_scalar_;
};

}  // namespace bc_native
