// Attention for a few query positions over a KV cache (decode, a chat's next turn), free of
// MLX headers. Grouped query heads share one pass over their key/value head.
#pragma once

#include <cstdint>

namespace bc_native {

// Query positions from which the tiled kernel runs. 1: every pass, so a position's output
// is the same arithmetic whether it is computed alone, in a chunk or in a batch (issue #25;
// docs/determinism.md). 16 was the fastest split (engine.native.bench_attention) and is
// what BATCHCHAT_INVARIANT=0 asks for.
constexpr int kTiledFrom = 1;
constexpr int kTiledFromVariant = 16;

enum class MaskKind : int { none = 0, causal = 1, boolean = 2, additive = 3 };

struct AttnArgs {
  // q (B, Hq, L, D), k and v (B, Hkv, T, D): strides in elements for batch, head and
  // position; the last dimension is contiguous. Views of a larger cache buffer are fine.
  const float* q;
  const float* k;
  const float* v;
  int64_t qs[3], ks[3], vs[3];
  // mask (B, Hq, L, T) with strides for each (0 where broadcast): uint8 (true = attend)
  // for boolean, float32 added to the scores for additive; unused for none and causal
  // (causal: query i sees keys up to T - L + i).
  const void* mask = nullptr;
  int64_t ms[4] = {0, 0, 0, 0};
  MaskKind mask_kind = MaskKind::none;
  float* out;  // (B, Hq, L, D) row-major
  int B, Hq, Hkv, L, T, D;
  float scale;
  // > 0: each score s = scale * q.k is capped to softcap * tanh(s / softcap) before its
  // mask (Gemma 2's attention logit soft-capping; softcap.h); 0: none. Not with an
  // additive mask on the two-pass kernel (cache_attention refuses it).
  float softcap = 0.f;
  // Hq attention sinks or null: each query head's logit joins its softmax's denominator
  // as a key with no value (gpt-oss; mx.fast.scaled_dot_product_attention's `sinks`).
  const float* sinks = nullptr;
};

// out = softmax(scale * q @ k.T + mask) @ v, in float32. A row with every key masked out
// gives zeros. From `tiled_from` query positions on (0: never) the tiled kernel of
// attention_tiled.cpp runs instead of the two-pass one (scores of a whole row at once).
void attention_run(const AttnArgs& a, bool force_scalar, int tiled_from = kTiledFrom);

}  // namespace bc_native
