// GGML blocks to MLX's affine layout (ggml_decode.h). Each block is decoded into its values
// q (unsigned, below 2^bits) and its groups' scale and bias exactly as ggml_types.py computes
// them in numpy (float32 products of an fp16 block scale and an integer sub-scale), then q
// is packed as MLX packs it: 8-bit, one byte a value; 4-bit, two values a byte, low first.

#include "ggml_decode.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "packed.h"

namespace bc_native {

namespace {

// gguf-py's GGMLQuantizationType numbers
enum : int {
  Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11, Q4_K = 12,
  Q5_K = 13, Q6_K = 14, IQ4_NL = 20, IQ4_XS = 23, MXFP4 = 39
};

constexpr int8_t kIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                             1,    13,   25,  38,  53,  69,  89,  113};
constexpr int8_t kMxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

struct Type {
  int block, size, group, bits;
};

bool type_of(int type, Type* t) {
  switch (type) {
    case Q4_0: *t = {32, 18, 32, 4}; return true;
    case Q4_1: *t = {32, 20, 32, 4}; return true;
    case Q5_0: *t = {32, 22, 32, 8}; return true;
    case Q5_1: *t = {32, 24, 32, 8}; return true;
    case Q8_0: *t = {32, 34, 32, 8}; return true;
    case Q2_K: *t = {256, 84, 16, 4}; return true;
    case Q3_K: *t = {256, 110, 32, 8}; return true;
    case Q4_K: *t = {256, 144, 32, 4}; return true;
    case Q5_K: *t = {256, 176, 32, 8}; return true;
    case Q6_K: *t = {256, 210, 16, 8}; return true;
    case IQ4_NL: *t = {32, 18, 32, 8}; return true;
    case IQ4_XS: *t = {256, 136, 32, 8}; return true;
    case MXFP4: *t = {32, 17, 32, 8}; return true;
    default: return false;
  }
}

inline float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return load_scale(&h, 0, ScaleType::f16);
}

// ggml's e8m0_to_fp32_half: 2^(e - 128) (subnormal for e < 2)
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Q4_K / Q5_K: the 6-bit scale and minimum of sub-block j (gguf-py's get_scale_min)
inline void k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K: a block's 256 values (below 16 / 32), its 8 sub-scales and minimums (6-bit)
// and its d and dmin (fp16, widened exactly).
void k4_parts(int type, const uint8_t* x, uint8_t* q, uint8_t* sc, uint8_t* m, float* d,
              float* dmin) {
  *d = f16(x);
  *dmin = f16(x + 2);
  const uint8_t* sc6 = x + 4;
  const uint8_t* qh = x + 16;  // Q5_K only
  const uint8_t* qs = x + (type == Q4_K ? 16 : 48);
  for (int j = 0; j < 8; ++j) {
    int a, b;
    k_scale_min(sc6, j, &a, &b);
    sc[j] = (uint8_t)a;
    m[j] = (uint8_t)b;
  }
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 32; ++i) {
      const uint8_t byte = qs[c * 32 + i];
      int lo = byte & 0x0f, hi = byte >> 4;
      if (type == Q5_K) {
        lo |= ((qh[i] >> (2 * c)) & 1) << 4;
        hi |= ((qh[i] >> (2 * c + 1)) & 1) << 4;
      }
      q[c * 64 + i] = (uint8_t)lo;
      q[c * 64 + 32 + i] = (uint8_t)hi;
    }
}

// Q6_K: a block's 256 values (below 64), its 16 int8 sub-scales and d.
void k6_parts(const uint8_t* x, uint8_t* q, int8_t* sc, float* d) {
  const uint8_t* ql = x;
  const uint8_t* qh = x + 128;
  std::memcpy(sc, x + 192, 16);
  *d = f16(x + 208);
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < 4; ++c)
      for (int i = 0; i < 32; ++i) {
        const uint8_t l = ql[h * 64 + (c % 2) * 32 + i];
        const int lo = c < 2 ? l & 0x0f : l >> 4;
        const int hi = (qh[h * 32 + i] >> (2 * c)) & 3;
        q[h * 128 + c * 32 + i] = (uint8_t)(lo | (hi << 4));
      }
}

// One block: its values into q (block of them) and its groups' scale/bias into s, b.
void block(int type, const uint8_t* x, uint8_t* q, float* s, float* b) {
  switch (type) {
    case Q4_0: case IQ4_NL: case MXFP4: {
      const int head = type == MXFP4 ? 1 : 2;
      const float d = type == MXFP4 ? e8m0_half(x[0]) : f16(x);
      for (int j = 0; j < 16; ++j) {
        const int lo = x[head + j] & 0x0f, hi = x[head + j] >> 4;
        if (type == Q4_0) {
          q[j] = (uint8_t)lo;
          q[j + 16] = (uint8_t)hi;
        } else {
          const int8_t* kv = type == MXFP4 ? kMxfp4 : kIq4;
          q[j] = (uint8_t)(kv[lo] + 128);
          q[j + 16] = (uint8_t)(kv[hi] + 128);
        }
      }
      s[0] = d;
      b[0] = d * (type == Q4_0 ? -8.f : -128.f);
      return;
    }
    case Q4_1:
      for (int j = 0; j < 16; ++j) {
        q[j] = x[4 + j] & 0x0f;
        q[j + 16] = x[4 + j] >> 4;
      }
      s[0] = f16(x);
      b[0] = f16(x + 2);
      return;
    case Q5_0: case Q5_1: {
      const int off = type == Q5_0 ? 2 : 4;
      uint32_t qh;
      std::memcpy(&qh, x + off, 4);
      for (int j = 0; j < 16; ++j) {
        q[j] = (uint8_t)((x[off + 4 + j] & 0x0f) | (((qh >> j) & 1) << 4));
        q[j + 16] = (uint8_t)((x[off + 4 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
      }
      const float d = f16(x);
      s[0] = d;
      b[0] = type == Q5_0 ? d * -16.f : f16(x + 2);
      return;
    }
    case Q8_0: {
      const float d = f16(x);
      for (int j = 0; j < 32; ++j) q[j] = (uint8_t)((int)(int8_t)x[2 + j] + 128);
      s[0] = d;
      b[0] = d * -128.f;
      return;
    }
    case Q4_K: case Q5_K: {
      uint8_t sc[8], m[8];
      float d, dmin;
      k4_parts(type, x, q, sc, m, &d, &dmin);
      for (int j = 0; j < 8; ++j) {
        s[j] = d * (float)sc[j];
        b[j] = -(dmin * (float)m[j]);
      }
      return;
    }
    case Q6_K: {
      int8_t sc[16];
      float d;
      k6_parts(x, q, sc, &d);
      for (int g = 0; g < 16; ++g) {
        s[g] = d * (float)sc[g];
        b[g] = s[g] * -32.f;
      }
      return;
    }
    case Q2_K: {
      const uint8_t* sc = x;
      const uint8_t* qs = x + 16;
      const float d = f16(x + 80), dmin = f16(x + 82);
      for (int g = 0; g < 16; ++g) {
        s[g] = d * (float)(sc[g] & 0x0f);
        b[g] = -(dmin * (float)(sc[g] >> 4));
      }
      for (int h = 0; h < 2; ++h)
        for (int c = 0; c < 4; ++c)
          for (int i = 0; i < 32; ++i)
            q[h * 128 + c * 32 + i] = (uint8_t)((qs[h * 32 + i] >> (2 * c)) & 3);
      return;
    }
    case Q3_K: {
      const uint8_t* hm = x;
      const uint8_t* qs = x + 32;
      const uint8_t* raw = x + 96;
      const float d = f16(x + 108);
      int sc[16];
      for (int g = 0; g < 16; ++g) {
        const int low = g < 8 ? raw[g] & 0x0f : raw[g - 8] >> 4;
        const int high = (raw[8 + g % 4] >> (2 * (g / 4))) & 3;
        sc[g] = (low | (high << 4)) - 32;
      }
      for (int h = 0; h < 2; ++h)
        for (int c = 0; c < 4; ++c)
          for (int i = 0; i < 32; ++i) {
            const int v = h * 128 + c * 32 + i;
            const int l = (qs[h * 32 + i] >> (2 * c)) & 3;
            const int hbit = (hm[i] >> (v / 32)) & 1;
            const int value = (l - 4 * (1 - hbit)) * sc[v / 16];  // in [-124, 128]
            q[v] = (uint8_t)(value + 124);
          }
      for (int g = 0; g < 8; ++g) {
        s[g] = d;
        b[g] = d * -124.f;
      }
      return;
    }
    case IQ4_XS: {
      const float d = f16(x);
      uint16_t sh;
      std::memcpy(&sh, x + 2, 2);
      const uint8_t* sl = x + 4;
      const uint8_t* qs = x + 8;
      for (int j = 0; j < 8; ++j) {
        const int ls = ((sl[j / 2] >> (4 * (j % 2))) & 0x0f) | (((sh >> (2 * j)) & 3) << 4);
        s[j] = d * (float)(ls - 32);
        b[j] = s[j] * -128.f;
        for (int i = 0; i < 16; ++i) {
          q[j * 32 + i] = (uint8_t)(kIq4[qs[j * 16 + i] & 0x0f] + 128);
          q[j * 32 + 16 + i] = (uint8_t)(kIq4[qs[j * 16 + i] >> 4] + 128);
        }
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace

bool ggml_affine_form(int type, int* group, int* bits) {
  Type t;
  if (!type_of(type, &t)) return false;
  *group = t.group;
  *bits = t.bits;
  return true;
}

long ggml_row_bytes(int type, long K) {
  Type t;
  if (!type_of(type, &t) || K % t.block) return 0;
  return K / t.block * t.size;
}

namespace {

// One row of `t` blocks into MLX's affine layout.
void decode_row(int type, const Type& t, const uint8_t* x, long K, uint8_t* out, float* scales,
                float* biases) {
  const long blocks = K / t.block, per_block = t.block / t.group;
  uint8_t q[256];
  for (long i = 0; i < blocks; ++i) {
    block(type, x + i * t.size, q, scales + i * per_block, biases + i * per_block);
    if (t.bits == 8) {
      std::memcpy(out + i * t.block, q, t.block);
    } else {
      uint8_t* o = out + i * t.block / 2;
      for (int j = 0; j < t.block / 2; ++j) o[j] = (uint8_t)(q[2 * j] | (q[2 * j + 1] << 4));
    }
  }
}

}  // namespace

void ggml_to_affine(int type, const uint8_t* src, long rows, long K, uint8_t* w,
                    float* scales, float* biases) {
  Type t;
  if (!type_of(type, &t)) return;
  const long groups = K / t.group, row_in = K / t.block * t.size, row_out = K * t.bits / 8;
  const int threads = std::max(1, qmv_threads());
  const int chunks = (int)std::min<long>(rows, 4L * threads);
  parallel_chunks(chunks, rows * K, [&](int c) {
    for (long r = rows * c / chunks; r < rows * (c + 1) / chunks; ++r)
      decode_row(type, t, src + r * row_in, K, w + r * row_out, scales + r * groups,
                 biases + r * groups);
  });
}

int ggml_packed_form(int type) {
  if (type == Q4_0) return kQ40;
  if (type == Q8_0) return kQ80;
  if (type == Q5_0) return kQ50;
  if (type == Q5_1) return kQ51;
  if (type == Q4_1) return kQ41;
  return type == Q4_K ? kQ4K : type == Q5_K ? kQ5K : type == Q6_K ? kQ6K : kAffine;
}

void ggml_to_packed(int type, const uint8_t* src, long N, long K, const int32_t* order,
                    uint8_t* wp, void* sp, float* bp) {
  Type t;
  if (!type_of(type, &t)) return;
  const int form = ggml_packed_form(type);
  int group = t.group, bits = t.bits;
  form_layout(form, &group, &bits);
  const long blocks = K / t.block, row_in = blocks * t.size;
  const long per_block = t.block / t.group, subs = t.block / 32;  // 32-blocks a GGML block
  const size_t panel_bytes = (size_t)K * kPanel * bits / 8, bb = (size_t)kPanel * 4 * bits;
  const size_t s_bytes = panel_scale_bytes(form, (int)K, group);
  const size_t b_count = panel_bias_count(form, (int)K, group);
  clear_last_panel((int)N, (int)K, group, bits, wp, sp, bp, form);
  // A row's GGML blocks decoded one at a time into values and put straight into the row's
  // lane of its panel (packed.h's layout), scales and biases (or a K-quant's parts) into
  // theirs: the weights are written once, in the layout the kernel reads.
  parallel_chunks(panels((int)N), N * K, [&](int pn) {
    uint8_t q[256];
    float s[16], b[16];  // a GGML block's groups: at most 256 / 16
    uint8_t* panel = wp + (size_t)pn * panel_bytes;
    uint8_t* ps = static_cast<uint8_t*>(sp) + (size_t)pn * s_bytes;
    float* pb = bp + (size_t)pn * b_count;
    for (int ln = 0; ln < kPanel && (long)pn * kPanel + ln < N; ++ln) {
      const long n = (long)pn * kPanel + ln, r = order ? order[n] : n;
      const uint8_t* x = src + r * row_in;
      for (long i = 0; i < blocks; ++i) {
        const uint8_t* blk = x + i * t.size;
        if (form == kQ4K || form == kQ5K) {  // 6-bit sc, m; the file's fp16 d, dmin
          uint8_t sc[8], m[8];
          float d, dmin;
          k4_parts(type, blk, q, sc, m, &d, &dmin);
          uint8_t* sb = ps + (size_t)i * kSuperScaleBytes;
          uint32_t high = 0;
          for (int g = 0; g < 8; ++g) {
            sb[16 * g + ln] = (uint8_t)((sc[g] & 15) | ((m[g] & 15) << 4));
            high |= (uint32_t)(((sc[g] >> 4) & 3) | (((m[g] >> 4) & 3) << 2)) << (4 * g);
          }
          std::memcpy(sb + 128 + 4 * ln, &high, 4);
          std::memcpy(sb + 192 + 2 * ln, blk, 2);      // d: the block's first 2 bytes
          std::memcpy(sb + 224 + 2 * ln, blk + 2, 2);  // dmin: the next 2
        } else if (form == kQ6K) {
          int8_t sc[16];
          float d;
          k6_parts(blk, q, sc, &d);
          uint8_t* sb = ps + (size_t)i * kSuperScaleBytes6;
          for (int g = 0; g < 16; ++g) sb[g * kPanel + ln] = (uint8_t)sc[g];
          std::memcpy(sb + 256 + 2 * ln, blk + 208, 2);  // d: the block's last 2 bytes
        } else if (scale_only(form)) {  // the block's fp16 d as it is (its first 2 bytes)
          block(type, blk, q, s, b);
          std::memcpy(ps + (i * kPanel + ln) * 2, blk, 2);
        } else if (scale_min(form)) {  // the block's fp16 d and m as they are (bytes 0-3)
          block(type, blk, q, s, b);
          std::memcpy(ps + (i * 2 * kPanel + ln) * 2, blk, 2);
          std::memcpy(ps + ((i * 2 + 1) * kPanel + ln) * 2, blk + 2, 2);
        } else {
          block(type, blk, q, s, b);
          float* fs = reinterpret_cast<float*>(ps);
          for (long g = 0; g < per_block; ++g) {
            fs[(i * per_block + g) * kPanel + ln] = s[g];
            pb[(i * per_block + g) * kPanel + ln] = b[g];
          }
        }
        for (long c = 0; c < subs; ++c)
          pack_block32(q + 32 * c, bits, ln, panel + (size_t)(i * subs + c) * bb);
      }
    }
  });
}

}  // namespace bc_native
