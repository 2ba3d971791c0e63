// MLX custom primitive: attention of a few query positions over a KV cache, CPU only.
#pragma once

#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace bc_native {

namespace mx = mlx::core;

// softmax(scale * q @ k.T + mask) @ v for q (B, Hq, L, D), k and v (B, Hkv, T, D) float32,
// Hq a multiple of Hkv. mask_kind 0: none; 1: causal (query i sees keys up to T - L + i);
// 2: `mask` bool, true = attend; 3: `mask` float32 added to the scores. `mask` must be
// broadcastable to (B, Hq, L, T) (ignored for kinds 0 and 1). tiled_from: query positions
// from which the tiled kernel runs (-1: kTiledFrom, 0: never; tests and benchmarks).
// softcap > 0: scores capped to softcap * tanh(s / softcap) before the mask (Gemma 2);
// not with an additive mask (kind 3). sinks: (Hq,) logits that join each head's softmax
// denominator as keys without values (gpt-oss), or a 0-size array for none.
// kv_bits 8 or 4: k and v are uint8 (B, Hkv, T, W), packed rows of D values in groups of
// kv_group (engine/kv_quant.py; attention.h AttnArgs.kq), read by the tiled kernel.
mx::array cache_attention(const mx::array& q, const mx::array& k, const mx::array& v,
                          const mx::array& mask, float scale, int mask_kind,
                          bool force_scalar = false, int tiled_from = -1,
                          float softcap = 0.f, const mx::array& sinks = mx::zeros({0}, mx::float32),
                          int kv_bits = 0, int kv_group = 0, mx::StreamOrDevice s = {});

// cache_attention with each batch row's keys and values in arrays of their own: ks[b] and
// vs[b] (1, Hkv, T_b, D) (packed rows with kv_bits), T_b per row, read in place (a view of
// a row's larger buffer is fine). T is the mask's width (kinds 2, 3) or the longest T_b;
// a row's keys past its T_b count as masked and are never read. Same bits as
// cache_attention over the rows stacked into one (B, Hkv, T, D) buffer.
mx::array cache_attention_rows(const mx::array& q, const std::vector<mx::array>& ks,
                               const std::vector<mx::array>& vs, const mx::array& mask,
                               float scale, int mask_kind, bool force_scalar = false,
                               int tiled_from = -1, float softcap = 0.f,
                               const mx::array& sinks = mx::zeros({0}, mx::float32),
                               int kv_bits = 0, int kv_group = 0, mx::StreamOrDevice s = {});

class CacheAttention : public mx::UnaryPrimitive {
 public:
  CacheAttention(mx::Stream stream, float scale, int mask_kind, bool force_scalar,
                 int tiled_from, float softcap = 0.f, int kv_bits = 0, int kv_group = 0,
                 int rows = 0)
      : mx::UnaryPrimitive(stream),
        scale_(scale),
        mask_kind_(mask_kind),
        force_scalar_(force_scalar),
        tiled_from_(tiled_from),
        softcap_(softcap),
        kv_bits_(kv_bits),
        kv_group_(kv_group),
        rows_(rows) {}

  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  void eval_gpu(const std::vector<mx::array>& inputs, mx::array& out) override;

  const char* name() const override { return "CacheAttention"; }
  bool is_equivalent(const mx::Primitive& other) const override;
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override;

 private:
  float scale_;
  int mask_kind_;
  bool force_scalar_;
  int tiled_from_;  // query positions from which the tiled kernel runs; 0 never, -1 default
  float softcap_;   // 0: none
  int kv_bits_;     // 0: float k and v; 8 or 4: packed rows
  int kv_group_;
  int rows_;        // 0: k and v are one (B, Hkv, T, D) buffer; B: a k and a v array a row
};

}  // namespace bc_native
