#include "attention_op.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention.h"
#include "dense.h"
#include "mlx/backend/cpu/encoder.h"

namespace bc_native {

namespace {

void check(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument("cache_attention: " + msg);
}

// Bytes (or floats, unpacked) a (token, head) row of K or V takes: packed rows hold their
// values then each group's float scale and bias (engine/kv_quant.py).
int kv_row_width(int D, int kv_bits, int kv_group) {
  if (!kv_bits) return D;
  check((kv_bits == 8 || kv_bits == 4) && (kv_group == 32 || kv_group == 64) &&
            D % kv_group == 0,
        "kv_bits must be 8 or 4, kv_group 32 or 64 dividing the head size");
  return D * kv_bits / 8 + 8 * (D / kv_group);
}

}  // namespace

mx::array cache_attention(const mx::array& q, const mx::array& k, const mx::array& v,
                          const mx::array& mask, float scale, int mask_kind, bool force_scalar,
                          int tiled_from, float softcap, const mx::array& sinks,
                          int kv_bits, int kv_group, mx::StreamOrDevice s) {
  check(q.ndim() == 4 && k.ndim() == 4 && v.ndim() == 4, "q, k and v must be 4-D");
  const mx::Dtype kv_dtype = kv_bits ? mx::uint8 : mx::float32;
  check(q.dtype() == mx::float32 && k.dtype() == kv_dtype && v.dtype() == kv_dtype,
        "q must be float32, k and v float32 (uint8 with kv_bits)");
  const int B = q.shape(0), Hq = q.shape(1), L = q.shape(2), D = q.shape(3);
  const int Hkv = k.shape(1), T = k.shape(2);
  const int width = kv_row_width(D, kv_bits, kv_group);
  check(k.shape() == v.shape() && k.shape(0) == B && k.shape(3) == width,
        "k and v must have shape (B, Hkv, T, D) matching q (packed rows with kv_bits)");
  check(Hkv > 0 && Hq % Hkv == 0, "query heads must be a multiple of key/value heads");
  check(mask_kind >= 0 && mask_kind <= 3, "mask_kind must be 0..3");
  check(mask_kind != 1 || L <= T, "a causal mask needs at most as many queries as keys");
  check(softcap >= 0.f && (softcap == 0.f || mask_kind != 3),
        "softcap must be >= 0, and takes no additive mask");
  auto stream = mx::to_stream(s);
  check(stream.device == mx::Device::cpu, "runs on the CPU only");
  std::vector<mx::array> inputs = {q, k, v};
  if (mask_kind >= 2) {
    auto m = mx::broadcast_to(mask, {B, Hq, L, T}, stream);
    if (mask_kind == 2) m = mx::astype(m, mx::bool_, stream);
    else if (m.dtype() != mx::float32) m = mx::astype(m, mx::float32, stream);
    inputs.push_back(m);
  }
  if (sinks.size()) {  // the last input: the kernel finds it by count
    check(sinks.ndim() == 1 && sinks.shape(0) == Hq, "sinks must have one entry a query head");
    inputs.push_back(mx::astype(sinks, mx::float32, stream));
  }
  return mx::array({B, Hq, L, D}, mx::float32,
                   std::make_shared<CacheAttention>(stream, scale, mask_kind, force_scalar,
                                                    tiled_from < 0 ? kTiledFrom : tiled_from,
                                                    softcap, kv_bits, kv_group),
                   std::move(inputs));
}

mx::array cache_attention_rows(const mx::array& q, const std::vector<mx::array>& ks,
                               const std::vector<mx::array>& vs, const mx::array& mask,
                               float scale, int mask_kind, bool force_scalar, int tiled_from,
                               float softcap, const mx::array& sinks, int kv_bits, int kv_group,
                               mx::StreamOrDevice s) {
  check(q.ndim() == 4 && q.dtype() == mx::float32, "q must be float32 (B, Hq, L, D)");
  const int B = q.shape(0), Hq = q.shape(1), L = q.shape(2), D = q.shape(3);
  check(B > 0 && (int)ks.size() == B && (int)vs.size() == B,
        "one k and one v array a batch row");
  const mx::Dtype kv_dtype = kv_bits ? mx::uint8 : mx::float32;
  const int width = kv_row_width(D, kv_bits, kv_group);
  const int Hkv = ks[0].ndim() == 4 ? ks[0].shape(1) : 0;
  int longest = 0;
  for (int b = 0; b < B; ++b) {
    const mx::array &k = ks[b], &v = vs[b];
    check(k.ndim() == 4 && k.shape() == v.shape() && k.shape(0) == 1 && k.shape(1) == Hkv &&
              k.shape(3) == width && k.dtype() == kv_dtype && v.dtype() == kv_dtype,
          "each row's k and v must be (1, Hkv, T_row, D), float32 (uint8 packed rows with "
          "kv_bits)");
    longest = std::max(longest, k.shape(2));
  }
  check(Hkv > 0 && Hq % Hkv == 0, "query heads must be a multiple of key/value heads");
  check(mask_kind >= 0 && mask_kind <= 3, "mask_kind must be 0..3");
  check(softcap >= 0.f && (softcap == 0.f || mask_kind != 3),
        "softcap must be >= 0, and takes no additive mask");
  const int T = mask_kind >= 2 ? mask.shape(-1) : longest;
  check(mask_kind != 1 || L <= T, "a causal mask needs at most as many queries as keys");
  auto stream = mx::to_stream(s);
  check(stream.device == mx::Device::cpu, "runs on the CPU only");
  std::vector<mx::array> inputs = {q};
  inputs.insert(inputs.end(), ks.begin(), ks.end());
  inputs.insert(inputs.end(), vs.begin(), vs.end());
  if (mask_kind >= 2) {
    auto m = mx::broadcast_to(mask, {B, Hq, L, T}, stream);
    if (mask_kind == 2) m = mx::astype(m, mx::bool_, stream);
    else if (m.dtype() != mx::float32) m = mx::astype(m, mx::float32, stream);
    inputs.push_back(m);
  }
  if (sinks.size()) {
    check(sinks.ndim() == 1 && sinks.shape(0) == Hq, "sinks must have one entry a query head");
    inputs.push_back(mx::astype(sinks, mx::float32, stream));
  }
  return mx::array({B, Hq, L, D}, mx::float32,
                   std::make_shared<CacheAttention>(stream, scale, mask_kind, force_scalar,
                                                    tiled_from < 0 ? kTiledFrom : tiled_from,
                                                    softcap, kv_bits, kv_group, B),
                   std::move(inputs));
}

void CacheAttention::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& encoder = mx::cpu::get_command_encoder(stream());
  // The kernel takes any strides except in the last dimension (a cache view is fine).
  auto usable = [&](const mx::array& a) {
    return a.shape(-1) == 1 || a.strides().back() == 1 ? a : dense(encoder, a);
  };
  const mx::array q = usable(inputs[0]);
  const int n_kv = rows_ ? 2 * rows_ : 2;
  out.set_data(mx::allocator::malloc(out.nbytes()));
  encoder.set_input_array(q);
  AttnArgs a;
  a.q = q.data<float>();
  // The rows form: a table of each row's buffers, kept alive by the dispatched task.
  std::shared_ptr<std::vector<RowKV>> table;
  if (rows_) {
    table = std::make_shared<std::vector<RowKV>>(rows_);
    for (int b = 0; b < rows_; ++b) {
      // every row's positions one packed or float row apart (ks[2] is one for all rows)
      auto rowwise = [&](const mx::array& x) {
        return x.strides()[2] == x.shape(3) && x.strides()[3] == 1 ? x : dense(encoder, x);
      };
      const mx::array k = rowwise(inputs[1 + b]), v = rowwise(inputs[1 + rows_ + b]);
      encoder.set_input_array(k);
      encoder.set_input_array(v);
      (*table)[b] = RowKV{k.data<void>(), v.data<void>(), k.strides()[1], v.strides()[1],
                          k.shape(2)};
    }
    const int width = inputs[1].shape(3);
    a.k = a.v = nullptr;
    a.kq = a.vq = nullptr;
    a.rows = table->data();
    a.qs[0] = q.strides()[0];
    a.qs[1] = q.strides()[1];
    a.qs[2] = q.strides()[2];
    a.ks[0] = a.vs[0] = a.ks[1] = a.vs[1] = 0;  // unused: each row's own
    a.ks[2] = a.vs[2] = width;
    a.Hkv = inputs[1].shape(1);
  }
  const mx::array k = rows_ ? inputs[1] : usable(inputs[1]);
  const mx::array v = rows_ ? inputs[2] : usable(inputs[2]);
  a.kv_bits = kv_bits_;
  a.kv_group = kv_group_;
  if (!rows_) {
    if (kv_bits_) {
      a.kq = k.data<uint8_t>();
      a.vq = v.data<uint8_t>();
      a.k = a.v = nullptr;
    } else {
      a.k = k.data<float>();
      a.v = v.data<float>();
    }
    encoder.set_input_array(k);
    encoder.set_input_array(v);
    for (int i = 0; i < 3; ++i) {
      a.qs[i] = q.strides()[i];
      a.ks[i] = k.strides()[i];
      a.vs[i] = v.strides()[i];
    }
    a.Hkv = k.shape(1);
  }
  a.mask_kind = static_cast<MaskKind>(mask_kind_);
  int T = 0;
  if (mask_kind_ >= 2) {
    const mx::array& m = inputs[1 + n_kv];
    T = m.shape(3);
    encoder.set_input_array(m);
    a.mask = m.data<void>();
    for (int i = 0; i < 4; ++i) a.ms[i] = m.strides()[i];
  }
  const size_t n_fixed = 1 + n_kv + (mask_kind_ >= 2 ? 1 : 0);
  if (inputs.size() > n_fixed) {
    const mx::array& sk = inputs[n_fixed];
    encoder.set_input_array(sk);
    a.sinks = sk.data<float>();
  }
  encoder.set_output_array(out);
  a.out = out.data<float>();
  a.B = q.shape(0);
  a.Hq = q.shape(1);
  a.L = q.shape(2);
  a.D = q.shape(3);
  if (rows_ && mask_kind_ < 2)
    for (const RowKV& r : *table) T = std::max(T, r.T);
  a.T = rows_ ? T : k.shape(2);
  a.scale = scale_;
  a.softcap = softcap_;
  encoder.dispatch([a, table, scalar = force_scalar_, tiled = tiled_from_]() {
    attention_run(a, scalar, tiled);
  });
}

void CacheAttention::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw std::runtime_error("cache_attention has no GPU implementation (use mx.fast)");
}

bool CacheAttention::is_equivalent(const mx::Primitive& other) const {
  auto& o = static_cast<const CacheAttention&>(other);
  return scale_ == o.scale_ && mask_kind_ == o.mask_kind_ && force_scalar_ == o.force_scalar_ &&
         tiled_from_ == o.tiled_from_ && softcap_ == o.softcap_ && kv_bits_ == o.kv_bits_ &&
         kv_group_ == o.kv_group_ && rows_ == o.rows_;
}

std::vector<mx::Shape> CacheAttention::output_shapes(const std::vector<mx::array>& inputs) {
  return {inputs[0].shape()};
}

}  // namespace bc_native
