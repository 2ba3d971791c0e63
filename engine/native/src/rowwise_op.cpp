#include "rowwise_op.h"

#include <stdexcept>
#include <string>

#include "dense.h"
#include "mlx/backend/cpu/encoder.h"
#include "rowwise.h"

namespace bc_native {

namespace {

void check(bool ok, const char* op, const std::string& msg) {
  if (!ok) throw std::invalid_argument(std::string(op) + ": " + msg);
}

mx::Stream cpu_stream(mx::StreamOrDevice s, const char* op) {
  auto stream = mx::to_stream(s);
  check(stream.device == mx::Device::cpu, op, "runs on the CPU only");
  return stream;
}

}  // namespace

mx::array rope(const mx::array& x, int dims, bool traditional, float scale,
               const mx::array& offset, const mx::array& inv_freq, mx::StreamOrDevice s) {
  check(x.ndim() >= 3 && x.dtype() == mx::float32, "rope", "x must be float32, at least 3-D");
  check(dims > 0 && dims % 2 == 0 && dims <= x.shape(-1), "rope",
        "dims must be even and at most the last dimension");
  check(offset.ndim() <= 1 && (offset.size() == 1 || offset.size() == (size_t)x.shape(0)) &&
            mx::issubdtype(offset.dtype(), mx::integer),
        "rope", "offset must be an integer scalar or one per batch row");
  check(inv_freq.ndim() == 1 && inv_freq.shape(0) == dims / 2, "rope",
        "inv_freq must have dims / 2 entries");
  auto stream = cpu_stream(s, "rope");
  return mx::array(x.shape(), mx::float32,
                   std::make_shared<RowwiseOp>(stream, RowwiseOp::Kind::rope, scale, dims,
                                               traditional),
                   {x, mx::astype(offset, mx::int32, stream),
                    mx::astype(inv_freq, mx::float32, stream)});
}

mx::array rms_norm(const mx::array& x, const mx::array& weight, float eps, bool force_scalar,
                   mx::StreamOrDevice s) {
  check(x.ndim() >= 1 && x.dtype() == mx::float32, "rms_norm", "x must be float32");
  check(weight.size() == 0 || (weight.ndim() == 1 && weight.shape(0) == x.shape(-1)), "rms_norm",
        "weight must have the size of x's last dimension");
  auto stream = cpu_stream(s, "rms_norm");
  std::vector<mx::array> inputs = {x};
  if (weight.size()) inputs.push_back(mx::astype(weight, mx::float32, stream));
  return mx::array(x.shape(), mx::float32,
                   std::make_shared<RowwiseOp>(stream, RowwiseOp::Kind::rms_norm, eps, 0,
                                               force_scalar),
                   std::move(inputs));
}

mx::array silu_mul(const mx::array& gate, const mx::array& up, bool force_scalar,
                   mx::StreamOrDevice s) {
  check(gate.dtype() == mx::float32 && up.dtype() == mx::float32 && gate.shape() == up.shape(),
        "silu_mul", "gate and up must be float32 arrays of one shape");
  auto stream = cpu_stream(s, "silu_mul");
  return mx::array(gate.shape(), mx::float32,
                   std::make_shared<RowwiseOp>(stream, RowwiseOp::Kind::silu_mul, 0.f, 0,
                                               force_scalar),
                   {gate, up});
}

void RowwiseOp::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& encoder = mx::cpu::get_command_encoder(stream());
  std::vector<mx::array> in;
  for (const auto& a : inputs) {
    // rope reads x through its strides (a transposed view of a projection, usually)
    const bool strided_ok = kind_ == Kind::rope && in.empty() && a.ndim() <= 4 &&
                            a.strides().back() == 1;
    in.push_back(strided_ok ? a : dense(encoder, a));
  }
  for (const auto& a : in) encoder.set_input_array(a);
  out.set_data(mx::allocator::malloc(out.nbytes()));
  encoder.set_output_array(out);
  float* y = out.data<float>();
  const float* x = in[0].data<float>();
  const int n = in[0].ndim() ? in[0].shape(-1) : 1;
  switch (kind_) {
    case Kind::rope: {
      RopeArgs a;
      a.x = x;
      a.out = y;
      a.offset = in[1].data<int32_t>();
      a.n_offsets = (int)in[1].size();
      a.inv_freq = in[2].data<float>();
      const auto& sh = in[0].shape();
      a.B = sh[0];
      a.T = sh[sh.size() - 2];
      a.D = sh.back();
      a.H = (int)(in[0].size() / ((size_t)a.B * a.T * a.D));
      const auto& st = in[0].strides();
      if (sh.size() == 4) {
        a.xs[0] = st[0], a.xs[1] = st[1], a.xs[2] = st[2];
      } else if (sh.size() == 3) {
        a.xs[0] = st[0], a.xs[1] = 0, a.xs[2] = st[1];
      } else {  // dense: (B, H..., T, D) row-major
        a.xs[2] = a.D, a.xs[1] = (int64_t)a.T * a.D, a.xs[0] = (int64_t)a.H * a.T * a.D;
      }
      a.dims = dims_;
      a.scale = param_;
      a.traditional = flag_;
      encoder.dispatch([a]() { rope_run(a); });
      break;
    }
    case Kind::rms_norm: {
      const float* w = in.size() > 1 ? in[1].data<float>() : nullptr;
      const int64_t rows = n ? (int64_t)(in[0].size() / n) : 0;
      encoder.dispatch([x, w, y, rows, n, eps = param_, scalar = flag_]() {
        rms_norm_run(x, w, y, rows, n, eps, scalar);
      });
      break;
    }
    case Kind::silu_mul: {
      const float* u = in[1].data<float>();
      encoder.dispatch([x, u, y, size = (int64_t)in[0].size(), scalar = flag_]() {
        silu_mul_run(x, u, y, size, scalar);
      });
      break;
    }
  }
}

void RowwiseOp::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw std::runtime_error(std::string(name()) + " has no GPU implementation (use mx.fast)");
}

bool RowwiseOp::is_equivalent(const mx::Primitive& other) const {
  auto& o = static_cast<const RowwiseOp&>(other);
  return kind_ == o.kind_ && param_ == o.param_ && dims_ == o.dims_ && flag_ == o.flag_;
}

}  // namespace bc_native
