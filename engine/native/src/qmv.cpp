#include "qmv.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "dense.h"
#include "kernels.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/utils.h"

namespace bc_native {

namespace {

void check(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument("quantized_matvec: " + msg);
}

}  // namespace

void check_weights(const mx::array& w, const mx::array& scales, const mx::array& biases,
                   int group_size, int bits, const std::string& who, bool packed) {
  auto check = [&](bool ok, const std::string& msg) {
    if (!ok) throw std::invalid_argument(who + ": " + msg);
  };
  check(bits == 4 || bits == 8, "bits must be 4 or 8");
  // groups of 16 (GGUF's Q6_K and Q2_K) only in the packed kernel (packed.h)
  check(group_size == 32 || group_size == 64 || (packed && group_size == 16),
        packed ? "group_size must be 16, 32 or 64" : "group_size must be 32 or 64");
  check(w.dtype() == mx::uint32 && w.ndim() == 2, "w must be a 2-D uint32 array");
  const int N = w.shape(0);
  const int K = w.shape(1) * 32 / bits;
  check(scales.shape() == mx::Shape({N, K / group_size}) && biases.shape() == scales.shape(),
        "scales and biases must have shape (N, K / group_size)");
  check(scales.dtype() == biases.dtype() &&
            (scales.dtype() == mx::float32 || scales.dtype() == mx::float16 ||
             scales.dtype() == mx::bfloat16),
        "scales and biases must share a float dtype");
}

mx::array dequantize_f32(const mx::array& w, const mx::array& scales, const mx::array& biases,
                         int group_size, int bits, bool force_scalar, mx::StreamOrDevice s) {
  check_weights(w, scales, biases, group_size, bits, "quantized_matvec");
  auto stream = mx::to_stream(s);
  check(stream.device == mx::Device::cpu, "runs on the CPU only");
  return mx::array({w.shape(0), w.shape(1) * 32 / bits}, mx::float32,
                   std::make_shared<QuantizedMatvec>(stream, group_size, bits, force_scalar,
                                                     true),
                   {w, scales, biases});
}

std::vector<mx::array> quantized_matvec_many(const mx::array& x,
                                             const std::vector<mx::array>& weights,
                                             int group_size, int bits, bool force_scalar,
                                             bool int8_x, mx::StreamOrDevice s) {
  check(!weights.empty() && weights.size() % 3 == 0,
        "weights must be (w, scales, biases) for each matrix");
  check(x.ndim() >= 1 && mx::issubdtype(x.dtype(), mx::floating), "x must be floating point");
  auto stream = mx::to_stream(s);
  check(stream.device == mx::Device::cpu, "runs on the CPU only");
  std::vector<mx::Shape> shapes;
  std::vector<mx::Dtype> dtypes;
  for (size_t i = 0; i < weights.size(); i += 3) {
    const auto &w = weights[i], &sc = weights[i + 1], &bi = weights[i + 2];
    check_weights(w, sc, bi, group_size, bits, "quantized_matvec");
    check(x.shape(-1) == w.shape(1) * 32 / bits,
          "x's last dimension must be " + std::to_string(w.shape(1) * 32 / bits));
    check(sc.dtype() == weights[1].dtype(), "all scales must share a dtype");
    auto shape = x.shape();
    shape.back() = w.shape(0);
    shapes.push_back(std::move(shape));
    dtypes.push_back(mx::float32);
  }
  std::vector<mx::array> inputs = {mx::astype(x, mx::float32, stream)};
  inputs.insert(inputs.end(), weights.begin(), weights.end());
  auto outs = mx::array::make_arrays(
      std::move(shapes), dtypes,
      std::make_shared<QuantizedMatvec>(stream, group_size, bits, force_scalar, false, int8_x),
      std::move(inputs));
  if (x.dtype() != mx::float32)
    for (auto& o : outs) o = mx::astype(o, x.dtype(), stream);
  return outs;
}

mx::array quantized_matvec(const mx::array& x, const mx::array& w, const mx::array& scales,
                           const mx::array& biases, int group_size, int bits,
                           bool force_scalar, bool int8_x, mx::StreamOrDevice s) {
  return quantized_matvec_many(x, {w, scales, biases}, group_size, bits, force_scalar, int8_x,
                               s)[0];
}

void QuantizedMatvec::eval_cpu(const std::vector<mx::array>& inputs,
                               std::vector<mx::array>& outputs) {
  auto& encoder = mx::cpu::get_command_encoder(stream());
  // The kernel reads plain row-major buffers; anything strided (rare: slices) is copied.
  auto dense = [&](const mx::array& a) { return bc_native::dense(encoder, a); };
  const int first = dequant_only_ ? 0 : 1;  // index of the first w
  mx::array x = dequant_only_ ? inputs[0] : dense(inputs[0]);
  if (!dequant_only_) encoder.set_input_array(x);
  std::vector<QmvArgs> parts;
  for (size_t i = first, o = 0; i + 2 < inputs.size(); i += 3, ++o) {
    mx::array w = dense(inputs[i]);
    mx::array sc = dense(inputs[i + 1]);
    mx::array bi = dense(inputs[i + 2]);
    mx::array& out = outputs[o];
    out.set_data(mx::allocator::malloc(out.nbytes()));
    encoder.set_input_array(w);
    encoder.set_input_array(sc);
    encoder.set_input_array(bi);
    encoder.set_output_array(out);
    QmvArgs a;
    a.x = dequant_only_ ? nullptr : x.data<float>();
    a.w = w.data<uint32_t>();
    a.scales = sc.data<void>();
    a.biases = bi.data<void>();
    a.y = out.data<float>();
    a.N = w.shape(0);
    a.K = w.shape(1) * 32 / bits_;
    a.M = dequant_only_ || !a.K ? 0 : (int)(x.size() / a.K);
    a.group_size = group_size_;
    a.bits = bits_;
    a.stype = sc.dtype() == mx::float32   ? ScaleType::f32
              : sc.dtype() == mx::float16 ? ScaleType::f16
                                          : ScaleType::bf16;
    parts.push_back(a);
  }
  if (dequant_only_) {
    encoder.dispatch([a = parts[0], scalar = force_scalar_]() { dequantize_run(a, scalar); });
  } else {
    encoder.dispatch([parts = std::move(parts), scalar = force_scalar_, i8 = int8_x_]() {
      qmv_run_many(parts, scalar, i8);
    });
  }
}

void QuantizedMatvec::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("quantized_matvec has no GPU implementation (use mx.quantized_matmul)");
}

bool QuantizedMatvec::is_equivalent(const mx::Primitive& other) const {
  auto& o = static_cast<const QuantizedMatvec&>(other);
  return group_size_ == o.group_size_ && bits_ == o.bits_ &&
         force_scalar_ == o.force_scalar_ && dequant_only_ == o.dequant_only_ &&
         int8_x_ == o.int8_x_;
}

std::vector<mx::Shape> QuantizedMatvec::output_shapes(const std::vector<mx::array>& inputs) {
  if (dequant_only_) return {{inputs[0].shape(0), inputs[0].shape(1) * 32 / bits_}};
  std::vector<mx::Shape> shapes;
  for (size_t i = 1; i + 2 < inputs.size(); i += 3) {
    auto shape = inputs[0].shape();
    shape.back() = inputs[i].shape(0);
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

}  // namespace bc_native
