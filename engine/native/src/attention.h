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

// One batch row's keys and values in a buffer of its own (the rows form: each sequence's
// KV where it was written, no shared (B, Hkv, T, D) buffer): base pointers of its (1, Hkv,
// T_row, D) arrays (float, or packed bytes with kv_bits), their head strides in elements
// (bytes when packed), and T_row. Keys at or past T_row count as masked and are never read.
struct RowKV {
  const void* k;
  const void* v;
  int64_t ks1, vs1;
  int T;
};

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
  // Quantized KV (engine/kv_quant.py; EngineConfig.kv_bits): kv_bits 8 or 4 and k, v null;
  // kq and vq then hold, per (batch row, head, position), a packed row of bytes: the
  // D * kv_bits / 8 bytes of values (element e in byte e (8 bits) or in byte e / 2's low
  // nibble when e is even, high when odd (4 bits)), D / kv_group float32 scales, then as
  // many float32 biases (value = q * scale + bias). Strides in bytes. 0: float k and v.
  int kv_bits = 0, kv_group = 0;
  const uint8_t* kq = nullptr;
  const uint8_t* vq = nullptr;
  // B rows of their own, or null (k, v / kq, vq with strides ks[0], vs[0] per row). With
  // rows, ks[2] and vs[2] still give the position stride, the same for every row.
  const RowKV* rows = nullptr;
};

// Keys row b may read: T, or fewer where its own buffer is shorter.
inline int row_keys(const AttnArgs& a, int b) {
  return a.rows && a.rows[b].T < a.T ? a.rows[b].T : a.T;
}

// Key and value head g of batch row b (element pointers; bytes when packed).
inline const float* key_head(const AttnArgs& a, int b, int g) {
  return a.rows ? static_cast<const float*>(a.rows[b].k) + g * a.rows[b].ks1
                : a.k + b * a.ks[0] + g * a.ks[1];
}
inline const float* value_head(const AttnArgs& a, int b, int g) {
  return a.rows ? static_cast<const float*>(a.rows[b].v) + g * a.rows[b].vs1
                : a.v + b * a.vs[0] + g * a.vs[1];
}
inline const uint8_t* packed_key_head(const AttnArgs& a, int b, int g) {
  return a.rows ? static_cast<const uint8_t*>(a.rows[b].k) + g * a.rows[b].ks1
                : a.kq + b * a.ks[0] + g * a.ks[1];
}
inline const uint8_t* packed_value_head(const AttnArgs& a, int b, int g) {
  return a.rows ? static_cast<const uint8_t*>(a.rows[b].v) + g * a.rows[b].vs1
                : a.vq + b * a.vs[0] + g * a.vs[1];
}

// One packed row (see AttnArgs.kq) as D floats: the one dequantization every path uses.
inline void dequantize_row(const uint8_t* row, int D, int bits, int group, float* out) {
  const int nw = D * bits / 8, groups = D / group;
  for (int g = 0; g < groups; ++g) {
    float scale, bias;
    __builtin_memcpy(&scale, row + nw + 4 * g, 4);
    __builtin_memcpy(&bias, row + nw + 4 * (groups + g), 4);
    float* o = out + g * group;
    if (bits == 8) {
      const uint8_t* w = row + g * group;
      for (int i = 0; i < group; ++i) o[i] = __builtin_fmaf((float)w[i], scale, bias);
    } else {
      const uint8_t* w = row + g * group / 2;
      for (int i = 0; i < group; i += 2) {
        o[i] = __builtin_fmaf((float)(w[i / 2] & 15), scale, bias);
        o[i + 1] = __builtin_fmaf((float)(w[i / 2] >> 4), scale, bias);
      }
    }
  }
}

// out = softmax(scale * q @ k.T + mask) @ v, in float32. A row with every key masked out
// gives zeros. From `tiled_from` query positions on (0: never) the tiled kernel of
// attention_tiled.cpp runs instead of the two-pass one (scores of a whole row at once).
void attention_run(const AttnArgs& a, bool force_scalar, int tiled_from = kTiledFrom);

}  // namespace bc_native
