// MLX custom primitive: quantized KV rows (engine/kv_quant.py) packed in one CPU op.
#pragma once

#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace bc_native {

namespace mx = mlx::core;

// x (..., D) float32 -> (..., width) uint8: each row is mx.quantize(x, group, bits)'s
// bytes laid end to end, [D * bits / 8 bytes of uint32 words][D / group float32 scales]
// [D / group float32 biases], bit for bit (MLX's CPU affine quantization, the same float
// operations in the same order). bits 4 or 8; group 32, 64 or 128 dividing D. `turn`:
// each row is first mx.hadamard_transform'ed (D a power of two; MLX's CPU butterflies and
// its scale 1 / sqrt(D), so the bytes of mx.quantize(mx.hadamard_transform(x))).
mx::array kv_pack(const mx::array& x, int bits, int group, bool turn = false,
                  mx::StreamOrDevice s = {});

class KvPack : public mx::UnaryPrimitive {
 public:
  KvPack(mx::Stream stream, int bits, int group, bool turn)
      : mx::UnaryPrimitive(stream), bits_(bits), group_(group), turn_(turn) {}
  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  void eval_gpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  const char* name() const override { return "NativeKvPack"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    auto& o = static_cast<const KvPack&>(other);
    return bits_ == o.bits_ && group_ == o.group_ && turn_ == o.turn_;
  }
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override;

 private:
  int bits_;
  int group_;
  bool turn_;
};

}  // namespace bc_native
