#include "kv_pack_op.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "dense.h"
#include "mlx/backend/cpu/encoder.h"

namespace bc_native {

namespace {

void check(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument("kv_pack: " + msg);
}

int64_t row_width(int64_t d, int bits, int group) {
  return d * bits / 8 + 2 * (int64_t)sizeof(float) * (d / group);
}

// One row: mlx/backend/cpu/quantized.cpp quantize<float, uint32_t>, group by group, with
// the same float operations (no contraction can apply: no product is added to), so the
// same words, scales and biases.
void pack_row(const float* w, uint8_t* out, int64_t d, int bits, int group) {
  const float n_bins = (float)((1 << bits) - 1);
  const float eps = 1e-7f;
  const int per_word = 32 / bits;
  const int64_t groups = d / group;
  uint8_t* words = out;
  uint8_t* scales = out + d * bits / 8;
  uint8_t* biases = scales + groups * sizeof(float);
  for (int64_t g = 0; g < groups; ++g) {
    const float* x = w + g * group;
    float w_min = std::numeric_limits<float>::infinity();
    float w_max = -w_min;
    for (int j = 0; j < group; ++j) {
      w_max = std::max(w_max, x[j]);
      w_min = std::min(w_min, x[j]);
    }
    const bool mask = std::abs(w_min) > std::abs(w_max);
    float scale = std::max((w_max - w_min) / n_bins, eps);
    scale = mask ? scale : -scale;
    const float edge = mask ? w_min : w_max;
    const float q0 = std::rint(edge / scale);
    float bias = 0;
    if (q0 != 0) {
      scale = edge / q0;
      bias = edge;
    }
    for (int j = 0; j < group / per_word; ++j) {
      uint32_t word = 0;
      for (int k = 0; k < per_word; ++k) {
        float q = std::rint((x[j * per_word + k] - bias) / scale);
        q = std::min(std::max(q, 0.0f), n_bins);
        word |= static_cast<uint32_t>(q) << (k * bits);
      }
      std::memcpy(words + (g * group / per_word + j) * sizeof(uint32_t), &word, sizeof word);
    }
    std::memcpy(scales + g * sizeof(float), &scale, sizeof(float));
    std::memcpy(biases + g * sizeof(float), &bias, sizeof(float));
  }
}

// mlx/backend/cpu/hadamard.cpp hadamard_n<float> on one row of n = 2^k values, in place.
void turn_row(float* data, int n, float scale) {
  const int n_over_2 = n / 2;
  for (int h = 1; h < n; h <<= 1) {
    for (int i = 0; i < n_over_2; i++) {
      const int k = i & (h - 1);
      const int j = ((i - k) << 1) + k;
      const float x = data[j];
      const float y = data[j + h];
      data[j] = x + y;
      data[j + h] = x - y;
      if (h == n_over_2) {
        data[j] *= scale;
        data[j + h] *= scale;
      }
    }
  }
}

}  // namespace

mx::array kv_pack(const mx::array& x, int bits, int group, bool turn, mx::StreamOrDevice s) {
  check(x.dtype() == mx::float32, "x must be float32");
  check(x.ndim() >= 1, "x must have a last axis");
  check(bits == 4 || bits == 8, "bits must be 4 or 8");
  check(group == 32 || group == 64 || group == 128, "group must be 32, 64 or 128");
  check(x.shape(-1) % group == 0, "the last axis must be a multiple of the group");
  check(!turn || (x.shape(-1) & (x.shape(-1) - 1)) == 0, "turn needs a power-of-two axis");
  auto stream = mx::to_stream(s);
  check(stream.device == mx::Device::cpu, "runs on the CPU only");
  auto shape = x.shape();
  shape.back() = (int)row_width(x.shape(-1), bits, group);
  return mx::array(shape, mx::uint8, std::make_shared<KvPack>(stream, bits, group, turn), {x});
}

std::vector<mx::Shape> KvPack::output_shapes(const std::vector<mx::array>& inputs) {
  auto shape = inputs[0].shape();
  shape.back() = (int)row_width(shape.back(), bits_, group_);
  return {shape};
}

void KvPack::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& encoder = mx::cpu::get_command_encoder(stream());
  const mx::array x = dense(encoder, inputs[0]);
  encoder.set_input_array(x);
  out.set_data(mx::allocator::malloc(out.nbytes()));
  encoder.set_output_array(out);
  const int64_t d = x.shape(-1);
  encoder.dispatch([from = x.data<float>(), to = out.data<uint8_t>(), d,
                    rows = d ? (int64_t)x.size() / d : 0, bits = bits_, group = group_,
                    turn = turn_]() {
    const int64_t width = row_width(d, bits, group);
    // mlx::core::hadamard_transform's default scale, computed as it computes it
    const float scale = 1.0f / std::sqrt((int)d);
    std::vector<float> row(turn ? d : 0);
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = from + r * d;
      if (turn) {
        std::memcpy(row.data(), src, d * sizeof(float));
        turn_row(row.data(), (int)d, scale);
        src = row.data();
      }
      pack_row(src, to + r * width, d, bits, group);
    }
  });
}

void KvPack::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw std::runtime_error("NativeKvPack has no GPU implementation (mx.quantize is used)");
}

}  // namespace bc_native
