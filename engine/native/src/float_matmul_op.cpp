#include "float_matmul_op.h"

#include <stdexcept>

#include "dense.h"
#include "float_matmul.h"
#include "mlx/backend/cpu/encoder.h"

namespace bc_native {

mx::array float_matmul(const mx::array& x, const mx::array& w, bool force_scalar,
                       mx::StreamOrDevice s) {
  if (x.dtype() != mx::float32 || w.dtype() != mx::float32)
    throw std::invalid_argument("float_matmul: x and w must be float32");
  if (x.ndim() < 1 || w.ndim() != 2 || x.shape(-1) != w.shape(1))
    throw std::invalid_argument("float_matmul: x must be (..., K) and w (N, K)");
  auto stream = mx::to_stream(s);
  if (stream.device != mx::Device::cpu)
    throw std::invalid_argument("float_matmul: runs on the CPU only");
  auto shape = x.shape();
  shape.back() = w.shape(0);
  return mx::array(shape, mx::float32, std::make_shared<FloatMatmulOp>(stream, force_scalar),
                   {x, w});
}

void FloatMatmulOp::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& encoder = mx::cpu::get_command_encoder(stream());
  const mx::array x = dense(encoder, inputs[0]), w = dense(encoder, inputs[1]);
  encoder.set_input_array(x);
  encoder.set_input_array(w);
  out.set_data(mx::allocator::malloc(out.nbytes()));
  encoder.set_output_array(out);
  const int64_t K = w.shape(1), N = w.shape(0);
  encoder.dispatch([x = x.data<float>(), w = w.data<float>(), y = out.data<float>(),
                    M = (int64_t)(K ? x.size() / K : 0), N, K, scalar = force_scalar_]() {
    float_matmul_run(x, w, y, M, N, K, scalar);
  });
}

void FloatMatmulOp::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw std::runtime_error("NativeFloatMatmul has no GPU implementation");
}

}  // namespace bc_native
