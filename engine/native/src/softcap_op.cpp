#include "softcap_op.h"

#include <stdexcept>

#include "dense.h"
#include "mlx/backend/cpu/encoder.h"
#include "softcap.h"

namespace bc_native {

mx::array softcap(const mx::array& x, float cap, bool force_scalar, mx::StreamOrDevice s) {
  if (x.dtype() != mx::float32) throw std::invalid_argument("softcap: x must be float32");
  if (!(cap > 0.f)) throw std::invalid_argument("softcap: cap must be positive");
  auto stream = mx::to_stream(s);
  if (stream.device != mx::Device::cpu)
    throw std::invalid_argument("softcap: runs on the CPU only");
  return mx::array(x.shape(), mx::float32, std::make_shared<SoftcapOp>(stream, cap, force_scalar),
                   {x});
}

void SoftcapOp::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& encoder = mx::cpu::get_command_encoder(stream());
  const mx::array x = dense(encoder, inputs[0]);
  encoder.set_input_array(x);
  out.set_data(mx::allocator::malloc(out.nbytes()));
  encoder.set_output_array(out);
  encoder.dispatch([x = x.data<float>(), y = out.data<float>(), size = (int64_t)out.size(),
                    cap = cap_, scalar = force_scalar_]() {
    softcap_run(x, y, size, cap, scalar);
  });
}

void SoftcapOp::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw std::runtime_error("NativeSoftcap has no GPU implementation");
}

}  // namespace bc_native
