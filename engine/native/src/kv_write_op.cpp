#include "kv_write_op.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "dense.h"
#include "mlx/backend/cpu/encoder.h"

namespace bc_native {

namespace {

void check(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument("kv_write: " + msg);
}

}  // namespace

mx::array kv_write(const mx::array& buffer, const mx::array& update, const mx::array& lengths,
                   mx::StreamOrDevice s) {
  check(buffer.ndim() == 4 && update.ndim() == 4, "buffer and update must be 4-D");
  check(update.dtype() == buffer.dtype(), "update must have the buffer's dtype");
  check(update.shape(0) <= buffer.shape(0) && update.shape(1) == buffer.shape(1) &&
            update.shape(3) == buffer.shape(3) && update.shape(2) <= buffer.shape(2),
        "update must be (n <= B, H, S <= T, D) for a (B, H, T, D) buffer");
  check(lengths.ndim() == 1 && lengths.shape(0) == update.shape(0) &&
            mx::issubdtype(lengths.dtype(), mx::integer),
        "lengths must be one integer per update row");
  auto stream = mx::to_stream(s);
  check(stream.device == mx::Device::cpu, "runs on the CPU only");
  return mx::array(buffer.shape(), buffer.dtype(), std::make_shared<KvWrite>(stream),
                   {buffer, update, mx::astype(lengths, mx::int32, stream)});
}

mx::array kv_write_columns(const mx::array& arena, const mx::array& update,
                           const mx::array& columns, mx::StreamOrDevice s) {
  check(arena.ndim() == 4 && update.ndim() == 4, "arena and update must be 4-D");
  check(arena.shape(0) == 1, "the arena must be (1, H, C, D)");
  check(update.dtype() == arena.dtype(), "update must have the arena's dtype");
  check(update.shape(1) == arena.shape(1) && update.shape(3) == arena.shape(3) &&
            update.shape(2) <= arena.shape(2),
        "update must be (n, H, S <= C, D) for a (1, H, C, D) arena");
  check(columns.ndim() == 1 && columns.shape(0) == update.shape(0) &&
            mx::issubdtype(columns.dtype(), mx::integer),
        "columns must be one integer per update row");
  auto stream = mx::to_stream(s);
  check(stream.device == mx::Device::cpu, "runs on the CPU only");
  return mx::array(arena.shape(), arena.dtype(), std::make_shared<KvWrite>(stream, true),
                   {arena, update, mx::astype(columns, mx::int32, stream)});
}

void KvWrite::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& encoder = mx::cpu::get_command_encoder(stream());
  const mx::array& buf = inputs[0];
  const mx::array upd = dense(encoder, inputs[1]);
  const mx::array len = dense(encoder, inputs[2]);
  encoder.set_input_array(upd);
  encoder.set_input_array(len);
  if (buf.flags().row_contiguous && buf.is_donatable()) {
    out.copy_shared_buffer(buf);  // in place: the usual case, one reference per layer
  } else {
    const mx::array src = dense(encoder, buf);
    encoder.set_input_array(src);
    out.set_data(mx::allocator::malloc(out.nbytes()));
    encoder.dispatch([from = src.data<char>(), to = out.data<char>(), n = out.nbytes()]() {
      std::memcpy(to, from, n);
    });
  }
  encoder.set_output_array(out);
  const auto& bs = buf.shape();
  const auto& us = upd.shape();
  encoder.dispatch([to = out.data<char>(), from = upd.data<char>(), lengths = len.data<int32_t>(),
                    n = us[0], H = us[1], S = us[2], T = bs[2], row = (size_t)bs[3] * out.itemsize(),
                    arena = arena_]() {
    for (int b = 0; b < n; ++b) {
      const int64_t at = lengths[b];
      if (at < 0 || at + S > T) continue;  // checked by the caller; never write out of bounds
      const int64_t into = arena ? 0 : b;  // the arena's rows are column ranges of row 0
      for (int h = 0; h < H; ++h) {
        char* dst = to + ((into * H + h) * T + at) * row;
        const char* src = from + ((int64_t)b * H + h) * S * row;
        std::memcpy(dst, src, S * row);  // S consecutive positions of one head
      }
    }
  });
}

void KvWrite::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw std::runtime_error("NativeKvWrite has no GPU implementation (mlx's scatter is used)");
}

}  // namespace bc_native
