#include "ggml_decode_op.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <stdexcept>

#include "ggml_decode.h"
#include "mlx/allocator.h"
#include "packed.h"
#include "weight_alloc.h"

namespace bc_native {

std::vector<mx::array> ggml_to_affine_arrays(int type, const uint8_t* src, size_t src_bytes,
                                             const std::vector<int>& rows_shape, long K) {
  int group = 0, bits = 0;
  const long row = ggml_row_bytes(type, K);
  if (!ggml_affine_form(type, &group, &bits) || row == 0)
    throw std::invalid_argument("ggml_to_affine_arrays: not a type this decodes, or K is "
                                "not a whole number of its blocks");
  long rows = 1;
  for (int d : rows_shape) rows *= d;
  if ((long)src_bytes < rows * row)
    throw std::invalid_argument("ggml_to_affine_arrays: the source is too small");
  // A model's load decodes ~1e9 weights: numpy outputs copied into MLX were ~a second of it.
  const size_t w_bytes = (size_t)rows * K * bits / 8, s_count = (size_t)rows * (K / group);
  auto* w = static_cast<uint8_t*>(weight_alloc(w_bytes));
  auto* s = static_cast<float*>(weight_alloc(sizeof(float) * s_count));
  auto* b = static_cast<float*>(weight_alloc(sizeof(float) * s_count));
  if (!w || !s || !b) {
    std::free(w);
    std::free(s);
    std::free(b);
    throw std::bad_alloc();
  }
  ggml_to_affine(type, src, rows, K, w, s, b);
  mx::Shape ws(rows_shape.begin(), rows_shape.end()), ss = ws;
  ws.push_back((int)(K * bits / 32));
  ss.push_back((int)(K / group));
  auto release = [](void* p) { std::free(p); };
  return {mx::array(w, ws, mx::uint32, release), mx::array(s, ss, mx::float32, release),
          mx::array(b, ss, mx::float32, release)};
}

std::vector<mx::array> ggml_to_packed_arrays(int type, const uint8_t* src, size_t src_bytes,
                                             long N, long K, const std::vector<int>& order) {
  int group = 0, bits = 0;
  const long row = ggml_row_bytes(type, K);
  if (!ggml_affine_form(type, &group, &bits) || row == 0 || K % 32)
    throw std::invalid_argument("ggml_to_packed_arrays: not a type this decodes, or K is "
                                "not a whole number of its blocks");
  if ((long)src_bytes < N * row)
    throw std::invalid_argument("ggml_to_packed_arrays: the source is too small");
  if (!order.empty()) {
    if ((long)order.size() != N)
      throw std::invalid_argument("ggml_to_packed_arrays: order must have N entries");
    for (int r : order)
      if (r < 0 || r >= N) throw std::invalid_argument("ggml_to_packed_arrays: bad row order");
  }
  const int form = ggml_packed_form(type);
  form_layout(form, &group, &bits);  // a K-quant's own form: its bits and groups
  const int P = panels((int)N);
  const size_t w_bytes = packed_weight_bytes((int)N, (int)K, bits);
  const size_t s_bytes = (size_t)P * panel_scale_bytes(form, (int)K, group);
  const size_t b_count = (size_t)P * panel_bias_count(form, (int)K, group);
  // In buffers of MLX's own allocator, handed over as they are: an array made from a raw
  // pointer is copied by MLX's CPU allocator (it keeps a size header before the data), a
  // second pass over every byte and a second set of page faults (~1.6 GB for a 1.5B).
  mx::allocator::Data wd = mx::allocator::malloc(w_bytes);
  mx::allocator::Data sd = mx::allocator::malloc(s_bytes);
  mx::allocator::Data bd = mx::allocator::malloc(sizeof(float) * std::max<size_t>(b_count, 1));
  auto* w = static_cast<uint8_t*>(wd.buffer().raw_ptr());
  auto* s = sd.buffer().raw_ptr();
  auto* b = static_cast<float*>(bd.buffer().raw_ptr());
  if (!w || !s || !b) throw std::bad_alloc();
  advise_huge(w, w_bytes);  // before the first write: the faults then take huge pages
  ggml_to_packed(type, src, N, K, order.empty() ? nullptr : order.data(), w, s, b);
  mx::array wa(std::move(wd), {P * kPanel, (int)(K * bits / 8)}, mx::uint8);
  if (form == kQ4K || form == kQ5K)  // 6-bit sc, m and fp16 d, dmin a super-block; no biases
    return {wa, mx::array(std::move(sd), {P, (int)(K / kSuper), kSuperScaleBytes}, mx::uint8),
            mx::array(std::move(bd), {P, 0, kPanel}, mx::float32)};
  if (form == kQ6K)  // int8 sc a 16-group and fp16 d a super-block; no biases
    return {wa, mx::array(std::move(sd), {P, (int)(K / kSuper), kSuperScaleBytes6}, mx::int8),
            mx::array(std::move(bd), {P, 0, kPanel}, mx::float32)};
  if (scale_only(form) || scale_min(form))  // the file's fp16 d (and m) a 32-block; no biases
    return {wa,
            mx::array(std::move(sd), {P, (int)(K / 32), scale_min(form) ? 2 * kPanel : kPanel},
                      mx::float16),
            mx::array(std::move(bd), {P, 0, kPanel}, mx::float32)};
  const int G = (int)(K / group);
  return {wa, mx::array(std::move(sd), {P, G, kPanel}, mx::float32),
          mx::array(std::move(bd), {P, G, kPanel}, mx::float32)};
}

}  // namespace bc_native
