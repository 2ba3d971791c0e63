// MLX custom primitive: the decode batch's KV write (engine/slot_cache.py), CPU only.
#pragma once

#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace bc_native {

namespace mx = mlx::core;

// buffer (B, H, T, D) with update (n, H, S, D), n <= B, of the same dtype written at
// columns lengths[b] .. lengths[b] + S of each row b < n (lengths: (n,) int32, each
// lengths[b] + S <= T). The result takes over the buffer's memory when nothing else holds
// it, so only the written positions are touched (mlx's scatter costs ~40 us a call here).
mx::array kv_write(const mx::array& buffer, const mx::array& update, const mx::array& lengths,
                   mx::StreamOrDevice s = {});

class KvWrite : public mx::UnaryPrimitive {
 public:
  explicit KvWrite(mx::Stream stream) : mx::UnaryPrimitive(stream) {}
  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  void eval_gpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  const char* name() const override { return "NativeKvWrite"; }
  bool is_equivalent(const mx::Primitive&) const override { return true; }
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    return {inputs[0].shape()};
  }
};

}  // namespace bc_native
