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

// The arena form (issue #47, one KV layout): arena (1, H, C, D), every update row b of
// (n, H, S, D) written into the arena's one row at columns[b] .. columns[b] + S (each row
// owns a column range of the arena). In place as kv_write.
mx::array kv_write_columns(const mx::array& arena, const mx::array& update,
                           const mx::array& columns, mx::StreamOrDevice s = {});

class KvWrite : public mx::UnaryPrimitive {
 public:
  explicit KvWrite(mx::Stream stream, bool arena = false)
      : mx::UnaryPrimitive(stream), arena_(arena) {}
  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  void eval_gpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  const char* name() const override { return "NativeKvWrite"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    return static_cast<const KvWrite&>(other).arena_ == arena_;
  }
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  bool arena_;  // every update row into the buffer's row 0 (kv_write_columns)
};

}  // namespace bc_native
