#include "moe_route_op.h"

#include <stdexcept>

#include "dense.h"
#include "mlx/backend/cpu/encoder.h"
#include "moe_route.h"

namespace bc_native {

std::vector<mx::array> moe_route(const mx::array& logits, int k, bool normalise,
                                 mx::StreamOrDevice s) {
  if (logits.dtype() != mx::float32 || logits.ndim() < 1)
    throw std::invalid_argument("moe_route: logits must be (..., E) float32");
  const int E = logits.shape(-1);
  if (k < 1 || k > E) throw std::invalid_argument("moe_route: k must be in [1, E]");
  auto stream = mx::to_stream(s);
  if (stream.device != mx::Device::cpu)
    throw std::invalid_argument("moe_route: runs on the CPU only");
  mx::Shape shape = logits.shape();
  shape.back() = k;
  return mx::array::make_arrays({shape, shape}, {mx::uint32, mx::float32},
                                std::make_shared<MoeRoute>(stream, k, normalise), {logits});
}

void MoeRoute::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  auto& encoder = mx::cpu::get_command_encoder(stream());
  const mx::array x = dense(encoder, inputs[0]);
  encoder.set_input_array(x);
  for (auto& o : outputs) {
    o.set_data(mx::allocator::malloc(o.nbytes()));
    encoder.set_output_array(o);
  }
  const int E = x.shape(-1);
  encoder.dispatch([l = x.data<float>(), M = (int64_t)(x.size() / E), E, k = k_,
                    norm = normalise_, inds = outputs[0].data<uint32_t>(),
                    scores = outputs[1].data<float>()]() {
    moe_route_run(l, M, E, k, norm, inds, scores);
  });
}

void MoeRoute::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("NativeMoeRoute has no GPU implementation");
}

}  // namespace bc_native
