#include "sample_op.h"

#include <stdexcept>
#include <string>

#include "dense.h"
#include "mlx/backend/cpu/encoder.h"
#include "sample.h"

namespace bc_native {

namespace {

void check(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument("sample_tokens: " + msg);
}

}  // namespace

mx::array sample_tokens(const mx::array& logits, const mx::array& u, const mx::array& params,
                        mx::StreamOrDevice s) {
  check(logits.ndim() == 2 && logits.dtype() == mx::float32, "logits must be (B, V) float32");
  const int B = logits.shape(0);
  check(u.shape() == mx::Shape({B}) && u.dtype() == mx::float32, "u must be (B,) float32");
  check(params.shape() == mx::Shape({B, 4}) && params.dtype() == mx::float32,
        "params must be (B, 4) float32");
  auto stream = mx::to_stream(s);
  check(stream.device == mx::Device::cpu, "runs on the CPU only");
  return mx::array({B}, mx::uint32, std::make_shared<SampleTokens>(stream), {logits, u, params});
}

void SampleTokens::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& encoder = mx::cpu::get_command_encoder(stream());
  const mx::array l = dense(encoder, inputs[0]);
  const mx::array u = dense(encoder, inputs[1]);
  const mx::array p = dense(encoder, inputs[2]);
  out.set_data(mx::allocator::malloc(out.nbytes()));
  encoder.set_input_array(l);
  encoder.set_input_array(u);
  encoder.set_input_array(p);
  encoder.set_output_array(out);
  SampleArgs a;
  a.logits = l.data<float>();
  a.u = u.data<float>();
  a.params = p.data<float>();
  a.out = reinterpret_cast<int32_t*>(out.data<uint32_t>());
  a.B = l.shape(0);
  a.V = l.shape(1);
  encoder.dispatch([a]() { sample_run(a); });
}

void SampleTokens::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw std::runtime_error("sample_tokens has no GPU implementation (use mlx-lm's sampler)");
}

}  // namespace bc_native
