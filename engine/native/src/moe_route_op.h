// MLX custom primitive for moe_route.h's routing (CPU only, float32 logits).
#pragma once

#include <vector>

#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace bc_native {

namespace mx = mlx::core;

// (inds uint32 (..., k), scores float32 (..., k)) for logits (..., E) float32: softmax, the
// k largest, normalised by their sum when `normalise` (moe_route.h), in one op.
std::vector<mx::array> moe_route(const mx::array& logits, int k, bool normalise,
                                 mx::StreamOrDevice s = {});

class MoeRoute : public mx::Primitive {
 public:
  MoeRoute(mx::Stream stream, int k, bool normalise)
      : mx::Primitive(stream), k_(k), normalise_(normalise) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  const char* name() const override { return "NativeMoeRoute"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    auto& o = static_cast<const MoeRoute&>(other);
    return k_ == o.k_ && normalise_ == o.normalise_;
  }
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    mx::Shape shape = inputs[0].shape();
    shape.back() = k_;
    return {shape, shape};
  }

 private:
  int k_;
  bool normalise_;
};

}  // namespace bc_native
