// MLX custom primitives for the row-wise ops of rowwise.h (CPU only, float32).
#pragma once

#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace bc_native {

namespace mx = mlx::core;

// mx.fast.rope (forward) for float32 x of shape (B, *, T, D): offset is an int32 scalar or
// one per batch row, inv_freq has dims / 2 entries (angle = (offset + t) * scale * inv_freq).
mx::array rope(const mx::array& x, int dims, bool traditional, float scale,
               const mx::array& offset, const mx::array& inv_freq, mx::StreamOrDevice s = {});

// mx.fast.rms_norm for float32 x; weight is (x.shape[-1],) or a 0-size array for none.
mx::array rms_norm(const mx::array& x, const mx::array& weight, float eps,
                   bool force_scalar = false, mx::StreamOrDevice s = {});

// silu(gate) * up, float32, same shapes.
mx::array silu_mul(const mx::array& gate, const mx::array& up, bool force_scalar = false,
                   mx::StreamOrDevice s = {});

class RowwiseOp : public mx::UnaryPrimitive {
 public:
  enum class Kind { rope, rms_norm, silu_mul };
  RowwiseOp(mx::Stream stream, Kind kind, float param, int dims = 0, bool flag = false)
      : mx::UnaryPrimitive(stream), kind_(kind), param_(param), dims_(dims), flag_(flag) {}

  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  void eval_gpu(const std::vector<mx::array>& inputs, mx::array& out) override;

  const char* name() const override {
    return kind_ == Kind::rope ? "NativeRope"
           : kind_ == Kind::rms_norm ? "NativeRMSNorm"
                                     : "NativeSiluMul";
  }
  bool is_equivalent(const mx::Primitive& other) const override;
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  Kind kind_;
  float param_;  // rope: position scale; rms_norm: eps
  int dims_;     // rope: rotated features
  bool flag_;    // rope: traditional; others: force the portable loop
};

}  // namespace bc_native
