// MLX custom primitive: one sampled token per row of logits (sample.h), CPU only.
#pragma once

#include <optional>

#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace bc_native {

namespace mx = mlx::core;

// logits (B, V) float32, u (B,) uniform in [0, 1), params (B, 4) float32 = temperature,
// top_p, min_p, top_k per row; returns (B,) uint32 token ids.
// With `penalty_at` (B, W) int32 and `penalty` (B,) float32 (W > 0): the repetition penalty
// first (sample.h's penalize_copy, on a copy; a column < 0 names the row's `pending` token,
// (B,) int32 or uint32), the values mlx-lm's processor gives, in the same op.
mx::array sample_tokens(const mx::array& logits, const mx::array& u, const mx::array& params,
                        const std::optional<mx::array>& penalty_at = std::nullopt,
                        const std::optional<mx::array>& penalty = std::nullopt,
                        const std::optional<mx::array>& pending = std::nullopt,
                        mx::StreamOrDevice s = {});

class SampleTokens : public mx::UnaryPrimitive {
 public:
  explicit SampleTokens(mx::Stream stream) : mx::UnaryPrimitive(stream) {}
  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  void eval_gpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  const char* name() const override { return "NativeSampleTokens"; }
  bool is_equivalent(const mx::Primitive&) const override { return true; }
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    return {{inputs[0].shape(0)}};
  }
};

}  // namespace bc_native
