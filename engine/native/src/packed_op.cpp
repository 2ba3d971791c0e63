#include "packed_op.h"

#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

#include "dense.h"
#include "kernels.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/transforms.h"
#include "packed.h"
#include "qmv.h"
#include "weight_alloc.h"

namespace bc_native {

namespace {

void check(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument("packed_matvec: " + msg);
}

// The form's group size and bits agree with the call's (packed.h: a K-quant's are fixed).
void check_form(int form, int group_size, int bits) {
  int g = group_size, b = bits;
  check(form_layout(form, &g, &b),
        "form must be 0 (affine), 1 (Q4_K), 2 (Q6_K), 3 (Q5_K), 4 (Q4_0), 5 (Q8_0), 6 (Q5_0), "
        "7 (Q5_1) or 8 (Q4_1)");
  check(g == group_size && b == bits,
        form == kAffine ? "bits must be 4 or 8" : "a K-quant form's group size and bits are its own");
  check(form != kAffine || bits == 4 || bits == 8, "bits must be 4 or 8");
}

// One packed (weights, scales, biases) of `rows` rows (a multiple of 16) for K and the form.
void check_packed(const mx::array& w, const mx::array& sc, const mx::array& bi, int rows, int K,
                  int group_size, int bits, int form, const std::string& what) {
  const int P = rows / kPanel;
  check(w.dtype() == mx::uint8 && w.ndim() == 2 && w.shape(0) == rows &&
            w.shape(1) == K * bits / 8,
        what + " weights do not match x's K, N or bits");
  if (form == kAffine) {
    check(sc.dtype() == mx::float32 && bi.dtype() == mx::float32 &&
              sc.shape() == mx::Shape({P, K / group_size, kPanel}) && bi.shape() == sc.shape(),
          what + " scales and biases do not match");
    return;
  }
  if (scale_only(form) || scale_min(form)) {  // fp16 d (and m) a 32-block
    const int per = scale_min(form) ? 2 * kPanel : kPanel;
    check(sc.dtype() == mx::float16 && sc.shape() == mx::Shape({P, K / 32, per}) &&
              bi.dtype() == mx::float32 && bi.shape() == mx::Shape({P, 0, kPanel}),
          what + " fp16 scales (and no biases) do not match the form");
    return;
  }
  check(K % kSuper == 0, "a K-quant form needs whole 256-blocks");
  if (form == kQ4K || form == kQ5K) {  // 6-bit sc, m and fp16 d, dmin in the scales' bytes
    check(sc.dtype() == mx::uint8 && sc.shape() == mx::Shape({P, K / kSuper, kSuperScaleBytes}) &&
              bi.dtype() == mx::float32 && bi.shape() == mx::Shape({P, 0, kPanel}),
          what + " sub-scales and super-block scales do not match the form");
    return;
  }
  check(sc.dtype() == mx::int8 && bi.dtype() == mx::float32 &&  // kQ6K: sc and d a 256
            sc.shape() == mx::Shape({P, K / kSuper, kSuperScaleBytes6}) &&
            bi.shape() == mx::Shape({P, 0, kPanel}),
        what + " sub-scales and super-block scales do not match the form");
}

}  // namespace

std::vector<mx::array> pack_quantized(const mx::array& w, const mx::array& scales,
                                      const mx::array& biases, int group_size, int bits) {
  check_weights(w, scales, biases, group_size, bits, "pack_quantized", /*packed=*/true);
  const int N = w.shape(0), K = w.shape(1) * 32 / bits;
  auto cpu = mx::Device::cpu;
  mx::array wc = mx::contiguous(w, false, cpu), sc = mx::contiguous(scales, false, cpu),
            bc = mx::contiguous(biases, false, cpu);
  mx::eval({wc, sc, bc});
  QmvArgs a{};
  a.w = wc.data<uint32_t>();
  a.scales = sc.data<void>();
  a.biases = bc.data<void>();
  a.N = N;
  a.K = K;
  a.group_size = group_size;
  a.bits = bits;
  a.stype = sc.dtype() == mx::float32   ? ScaleType::f32
            : sc.dtype() == mx::float16 ? ScaleType::f16
                                        : ScaleType::bf16;
  // Filled in place and handed to MLX as they are (a model's load packs ~1e9 weights: the
  // copies of std::vector outputs were a second of it for a 1.5B model).
  const size_t w_bytes = packed_weight_bytes(N, K, bits);
  const size_t s_count = packed_scale_count(N, K, group_size);
  auto* wp = static_cast<uint8_t*>(weight_alloc(w_bytes));
  auto* sp = static_cast<float*>(weight_alloc(sizeof(float) * s_count));
  auto* bp = static_cast<float*>(weight_alloc(sizeof(float) * s_count));
  if (!wp || !sp || !bp) {
    std::free(wp);
    std::free(sp);
    std::free(bp);
    throw std::bad_alloc();
  }
  pack_weights(a, wp, sp, bp);
  const int P = panels(N), G = K / group_size;
  auto release = [](void* p) { std::free(p); };
  return {mx::array(wp, {P * kPanel, K * bits / 8}, mx::uint8, release),
          mx::array(sp, {P, G, kPanel}, mx::float32, release),
          mx::array(bp, {P, G, kPanel}, mx::float32, release)};
}

std::vector<mx::array> packed_matvec_many(const mx::array& x, const std::vector<mx::array>& packed,
                                          const std::vector<int>& ns, int group_size, int bits,
                                          bool force_scalar, int form,
                                          const std::vector<int>& layouts,
                                          mx::StreamOrDevice s) {
  check(!packed.empty() && packed.size() == 3 * ns.size(),
        "packed must be (weights, scales, biases) for each N in ns");
  check(layouts.empty() || layouts.size() == 3 * ns.size(),
        "layouts must be (group_size, bits, form) for each N in ns");
  check(x.ndim() >= 1 && mx::issubdtype(x.dtype(), mx::floating), "x must be floating point");
  std::vector<int> each;
  for (size_t i = 0; i < ns.size(); ++i) {
    if (layouts.empty())
      each.insert(each.end(), {group_size, bits, form});
    else
      each.insert(each.end(), layouts.begin() + 3 * i, layouts.begin() + 3 * i + 3);
  }
  const int K = x.shape(-1);
  auto stream = mx::to_stream(s);
  check(stream.device == mx::Device::cpu, "runs on the CPU only");
  std::vector<mx::Shape> shapes;
  for (size_t i = 0; i < ns.size(); ++i) {
    const int gs = each[3 * i], b = each[3 * i + 1], f = each[3 * i + 2];
    check(gs == 16 || gs == 32 || gs == 64, "group_size must be 16, 32 or 64");
    check_form(f, gs, b);
    check(K % gs == 0, "x's last dimension must be a multiple of group_size");
    check_packed(packed[3 * i], packed[3 * i + 1], packed[3 * i + 2], panels(ns[i]) * kPanel, K,
                 gs, b, f, "packed");
    auto shape = x.shape();
    shape.back() = ns[i];
    shapes.push_back(std::move(shape));
  }
  std::vector<mx::array> inputs = {mx::astype(x, mx::float32, stream)};
  inputs.insert(inputs.end(), packed.begin(), packed.end());
  auto outs = mx::array::make_arrays(
      std::move(shapes), std::vector<mx::Dtype>(ns.size(), mx::float32),
      std::make_shared<PackedMatvec>(stream, ns, std::move(each), force_scalar),
      std::move(inputs));
  if (x.dtype() != mx::float32)
    for (auto& o : outs) o = mx::astype(o, x.dtype(), stream);
  return outs;
}

void PackedMatvec::eval_cpu(const std::vector<mx::array>& inputs,
                            std::vector<mx::array>& outputs) {
  auto& encoder = mx::cpu::get_command_encoder(stream());
  mx::array x = dense(encoder, inputs[0]);
  encoder.set_input_array(x);
  const int K = x.shape(-1), M = K ? (int)(x.size() / K) : 0;
  std::vector<PackedArgs> parts;
  for (size_t i = 0; i < ns_.size(); ++i) {
    const mx::array &w = inputs[1 + 3 * i], &sc = inputs[2 + 3 * i], &bi = inputs[3 + 3 * i];
    mx::array& out = outputs[i];
    out.set_data(mx::allocator::malloc(out.nbytes()));
    encoder.set_input_array(w);
    encoder.set_input_array(sc);
    encoder.set_input_array(bi);
    encoder.set_output_array(out);
    parts.push_back({w.data<uint8_t>(), sc.data<void>(), bi.data<float>(), out.data<float>(),
                     ns_[i], K, layouts_[3 * i], layouts_[3 * i + 1], layouts_[3 * i + 2]});
  }
  encoder.dispatch([x = x.data<float>(), M, parts = std::move(parts), scalar = force_scalar_]() {
    packed_run_many(x, M, parts, scalar);
  });
}

void PackedMatvec::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("packed_matvec has no GPU implementation");
}

bool PackedMatvec::is_equivalent(const mx::Primitive& other) const {
  auto& o = static_cast<const PackedMatvec&>(other);
  return ns_ == o.ns_ && layouts_ == o.layouts_ && force_scalar_ == o.force_scalar_;
}

std::vector<mx::Shape> PackedMatvec::output_shapes(const std::vector<mx::array>& inputs) {
  std::vector<mx::Shape> shapes;
  for (int n : ns_) {
    auto shape = inputs[0].shape();
    shape.back() = n;
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

std::vector<mx::array> pack_experts(const mx::array& w, const mx::array& scales,
                                    const mx::array& biases, int group_size, int bits) {
  check(w.ndim() == 3 && scales.ndim() == 3 && biases.ndim() == 3,
        "pack_experts takes stacked experts (E, N, ...)");
  const int E = w.shape(0), N = w.shape(1), K = w.shape(2) * 32 / bits;
  check_weights(mx::reshape(w, {E * N, w.shape(2)}), mx::reshape(scales, {E * N, scales.shape(2)}),
                mx::reshape(biases, {E * N, biases.shape(2)}), group_size, bits, "pack_experts",
                /*packed=*/true);
  check(scales.shape(0) == E && scales.shape(1) == N, "scales must be (E, N, K / group_size)");
  auto cpu = mx::Device::cpu;
  mx::array wc = mx::contiguous(w, false, cpu), sc = mx::contiguous(scales, false, cpu),
            bc = mx::contiguous(biases, false, cpu);
  mx::eval({wc, sc, bc});
  const int P = panels(N), G = K / group_size;
  const size_t w_bytes = packed_weight_bytes(N, K, bits);
  const size_t s_count = packed_scale_count(N, K, group_size);
  auto* wp = static_cast<uint8_t*>(weight_alloc(w_bytes * E));
  auto* sp = static_cast<float*>(weight_alloc(sizeof(float) * s_count * E));
  auto* bp = static_cast<float*>(weight_alloc(sizeof(float) * s_count * E));
  if (!wp || !sp || !bp) {
    std::free(wp);
    std::free(sp);
    std::free(bp);
    throw std::bad_alloc();
  }
  const size_t scale_bytes = mx::size_of(sc.dtype());
  for (int e = 0; e < E; ++e) {
    QmvArgs a{};
    a.w = wc.data<uint32_t>() + (size_t)e * N * w.shape(2);
    a.scales = static_cast<const char*>(sc.data<void>()) + (size_t)e * N * G * scale_bytes;
    a.biases = static_cast<const char*>(bc.data<void>()) + (size_t)e * N * G * scale_bytes;
    a.N = N;
    a.K = K;
    a.group_size = group_size;
    a.bits = bits;
    a.stype = sc.dtype() == mx::float32   ? ScaleType::f32
              : sc.dtype() == mx::float16 ? ScaleType::f16
                                          : ScaleType::bf16;
    pack_weights(a, wp + w_bytes * e, sp + s_count * e, bp + s_count * e);
  }
  auto release = [](void* p) { std::free(p); };
  return {mx::array(wp, {E * P * kPanel, K * bits / 8}, mx::uint8, release),
          mx::array(sp, {E * P, G, kPanel}, mx::float32, release),
          mx::array(bp, {E * P, G, kPanel}, mx::float32, release)};
}

std::vector<mx::array> packed_experts_matvec(const mx::array& x, const mx::array& indices,
                                             const std::vector<mx::array>& packed,
                                             const std::vector<int>& ns, int experts,
                                             int group_size, int bits, bool force_scalar,
                                             int form, int out,
                                             const std::optional<mx::array>& slot_weights,
                                             mx::StreamOrDevice s) {
  check(!packed.empty() && packed.size() == 3 * ns.size(),
        "packed must be (weights, scales, biases) for each N in ns");
  check(out == kEachPair || (out == kSwiGLU && ns.size() == 2 && ns[0] == ns[1]) ||
            (out == kWeightedSum && ns.size() == 1),
        "out must be 0 (each pair), 1 (SwiGLU of two of one N) or 2 (weighted sum of one)");
  check((out == kWeightedSum) == slot_weights.has_value(),
        "slot_weights go with out 2 (weighted sum), and only with it");
  check(x.ndim() == 3 && mx::issubdtype(x.dtype(), mx::floating), "x must be (M, X, K) floats");
  check(indices.ndim() == 2 && indices.shape(0) == x.shape(0) &&
            mx::issubdtype(indices.dtype(), mx::integer),
        "indices must be (M, k) integers");
  const int k = indices.shape(1);
  check(x.shape(1) == 1 || x.shape(1) == k, "x's second axis must be 1 or k");
  check(group_size == 16 || group_size == 32 || group_size == 64,
        "group_size must be 16, 32 or 64");
  check_form(form, group_size, bits);
  check(experts > 0, "experts must be positive");
  const int K = x.shape(-1);
  check(K % 32 == 0 && K % group_size == 0, "x's last dimension must be whole groups");
  auto stream = mx::to_stream(s);
  check(stream.device == mx::Device::cpu, "runs on the CPU only");
  std::vector<mx::Shape> shapes;
  for (size_t i = 0; i < ns.size(); ++i) {
    check_packed(packed[3 * i], packed[3 * i + 1], packed[3 * i + 2],
                 experts * panels(ns[i]) * kPanel, K, group_size, bits, form,
                 "packed experts (pack_experts): the expert count or");
    shapes.push_back({x.shape(0), k, ns[i]});
  }
  if (out != kEachPair) shapes.resize(1);
  if (out == kWeightedSum) shapes[0] = {x.shape(0), ns[0]};
  std::vector<mx::array> inputs = {mx::astype(x, mx::float32, stream),
                                   mx::astype(indices, mx::uint32, stream)};
  inputs.insert(inputs.end(), packed.begin(), packed.end());
  if (slot_weights) {
    check(slot_weights->shape() == indices.shape() &&
              mx::issubdtype(slot_weights->dtype(), mx::floating) && k > 0,
          "slot_weights must be (M, k) floats, k > 0");
    inputs.push_back(mx::astype(*slot_weights, mx::float32, stream));
  }
  const size_t n_out = shapes.size();
  auto outs = mx::array::make_arrays(
      std::move(shapes), std::vector<mx::Dtype>(n_out, mx::float32),
      std::make_shared<PackedExpertsMatvec>(stream, ns, experts, group_size, bits, force_scalar,
                                            form, out),
      std::move(inputs));
  if (x.dtype() != mx::float32)
    for (auto& o : outs) o = mx::astype(o, x.dtype(), stream);
  return outs;
}

void PackedExpertsMatvec::eval_cpu(const std::vector<mx::array>& inputs,
                                   std::vector<mx::array>& outputs) {
  auto& encoder = mx::cpu::get_command_encoder(stream());
  mx::array x = dense(encoder, inputs[0]);
  mx::array idx = dense(encoder, inputs[1]);
  encoder.set_input_array(x);
  encoder.set_input_array(idx);
  const int M = x.shape(0), X = x.shape(1), k = idx.shape(1);
  std::vector<PackedArgs> parts;
  for (size_t i = 0; i < ns_.size(); ++i) {
    const mx::array &w = inputs[2 + 3 * i], &sc = inputs[3 + 3 * i], &bi = inputs[4 + 3 * i];
    float* y = nullptr;  // kSwiGLU / kWeightedSum: one output, the first part's
    if (i < outputs.size()) {
      mx::array& out = outputs[i];
      out.set_data(mx::allocator::malloc(out.nbytes()));
      encoder.set_output_array(out);
      y = out.data<float>();
    }
    encoder.set_input_array(w);
    encoder.set_input_array(sc);
    encoder.set_input_array(bi);
    parts.push_back({w.data<uint8_t>(), sc.data<void>(), bi.data<float>(), y, ns_[i],
                     x.shape(-1), group_size_, bits_, form_});
  }
  const float* weights = nullptr;
  if (out_ == kWeightedSum) {
    mx::array wt = dense(encoder, inputs.back());
    encoder.set_input_array(wt);
    weights = wt.data<float>();
  }
  encoder.dispatch([x = x.data<float>(), idx = idx.data<uint32_t>(), M, X, k, E = experts_,
                    parts = std::move(parts), scalar = force_scalar_, out = out_, weights]() {
    packed_run_experts(x, M, X, k, idx, E, parts, scalar, out, weights);
  });
}

void PackedExpertsMatvec::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("packed_experts_matvec has no GPU implementation");
}

bool PackedExpertsMatvec::is_equivalent(const mx::Primitive& other) const {
  auto& o = static_cast<const PackedExpertsMatvec&>(other);
  return ns_ == o.ns_ && experts_ == o.experts_ && group_size_ == o.group_size_ &&
         bits_ == o.bits_ && force_scalar_ == o.force_scalar_ && form_ == o.form_ &&
         out_ == o.out_;
}

std::vector<mx::Shape> PackedExpertsMatvec::output_shapes(const std::vector<mx::array>& inputs) {
  std::vector<mx::Shape> shapes;
  for (int n : ns_) shapes.push_back({inputs[0].shape(0), inputs[1].shape(1), n});
  if (out_ != kEachPair) shapes.resize(1);
  if (out_ == kWeightedSum) shapes[0] = {inputs[0].shape(0), ns_[0]};
  return shapes;
}

}  // namespace bc_native
