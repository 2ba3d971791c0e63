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
                        const std::optional<mx::array>& penalty_at,
                        const std::optional<mx::array>& penalty,
                        const std::optional<mx::array>& pending, mx::StreamOrDevice s) {
  check(logits.ndim() == 2 && logits.dtype() == mx::float32, "logits must be (B, V) float32");
  const int B = logits.shape(0);
  check(u.shape() == mx::Shape({B}) && u.dtype() == mx::float32, "u must be (B,) float32");
  check(params.shape() == mx::Shape({B, 4}) && params.dtype() == mx::float32,
        "params must be (B, 4) float32");
  auto stream = mx::to_stream(s);
  check(stream.device == mx::Device::cpu, "runs on the CPU only");
  std::vector<mx::array> inputs{logits, u, params};
  check(penalty_at.has_value() == penalty.has_value(),
        "penalty_at and penalty come together");
  if (penalty_at && penalty_at->ndim() == 2 && penalty_at->shape(1) > 0) {
    check(penalty_at->shape(0) == B && penalty_at->dtype() == mx::int32,
          "penalty_at must be (B, W) int32");
    check(penalty->shape() == mx::Shape({B}) && penalty->dtype() == mx::float32,
          "penalty must be (B,) float32");
    const mx::array last = pending ? *pending : mx::full({B}, -1, mx::int32, stream);
    check(last.shape() == mx::Shape({B}) && (last.dtype() == mx::int32 || last.dtype() == mx::uint32),
          "pending must be (B,) int32 or uint32");
    inputs.insert(inputs.end(), {*penalty_at, *penalty, last});
  } else {
    check(!penalty_at || (penalty_at->ndim() == 2 && penalty_at->shape(0) == B),
          "penalty_at must be (B, W) int32");
  }
  return mx::array({B}, mx::uint32, std::make_shared<SampleTokens>(stream), std::move(inputs));
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
  if (inputs.size() == 3) {
    encoder.dispatch([a]() { sample_run(a); });
    return;
  }
  // the penalized rows in a buffer of the op's own (the logits are read, not written)
  const mx::array at = dense(encoder, inputs[3]);
  const mx::array f = dense(encoder, inputs[4]);
  const mx::array last = dense(encoder, inputs[5]);
  mx::array rows(l.shape(), mx::float32, nullptr, {});
  rows.set_data(mx::allocator::malloc(rows.nbytes()));
  encoder.add_temporary(rows);
  encoder.set_input_array(at);
  encoder.set_input_array(f);
  encoder.set_input_array(last);
  const int32_t* at_p = at.data<int32_t>();
  const int W = at.shape(1);
  const float* f_p = f.data<float>();
  const int32_t* last_p = reinterpret_cast<const int32_t*>(last.data<char>());
  float* rows_p = rows.data<float>();
  encoder.dispatch([a, at_p, W, f_p, last_p, rows_p]() mutable {
    penalize_copy(a.logits, a.B, a.V, at_p, W, f_p, last_p, rows_p);
    a.logits = rows_p;
    sample_run(a);
  });
}

void SampleTokens::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw std::runtime_error("sample_tokens has no GPU implementation (use mlx-lm's sampler)");
}

}  // namespace bc_native
