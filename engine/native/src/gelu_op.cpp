#include "gelu_op.h"

#include <stdexcept>
#include <string>

#include "dense.h"
#include "gelu.h"
#include "mlx/backend/cpu/encoder.h"

namespace bc_native {

mx::array gelu_tanh_mul(const mx::array& gate, const mx::array& up, bool force_scalar,
                        mx::StreamOrDevice s) {
  if (gate.dtype() != mx::float32 || up.dtype() != mx::float32 || gate.shape() != up.shape())
    throw std::invalid_argument("gelu_tanh_mul: gate and up must be float32 arrays of one shape");
  auto stream = mx::to_stream(s);
  if (stream.device != mx::Device::cpu)
    throw std::invalid_argument("gelu_tanh_mul: runs on the CPU only");
  return mx::array(gate.shape(), mx::float32,
                   std::make_shared<GeluMulOp>(stream, force_scalar), {gate, up});
}

void GeluMulOp::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& encoder = mx::cpu::get_command_encoder(stream());
  const mx::array g = dense(encoder, inputs[0]), u = dense(encoder, inputs[1]);
  encoder.set_input_array(g);
  encoder.set_input_array(u);
  out.set_data(mx::allocator::malloc(out.nbytes()));
  encoder.set_output_array(out);
  encoder.dispatch([g = g.data<float>(), u = u.data<float>(), y = out.data<float>(),
                    size = (int64_t)out.size(), scalar = force_scalar_]() {
    gelu_tanh_mul_run(g, u, y, size, scalar);
  });
}

void GeluMulOp::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw std::runtime_error("NativeGeluTanhMul has no GPU implementation");
}

}  // namespace bc_native
