// A row-major copy of a strided MLX array, for kernels that read plain buffers.
#pragma once

#include <cstring>

#include "mlx/array.h"
#include "mlx/backend/cpu/encoder.h"

namespace bc_native {

// `a` itself when already row-contiguous. The copy is made on the stream (dispatched before
// the kernel that reads it); MLX does not export its copy kernels, hence the element loop
// (only rare, small inputs get here).
inline mlx::core::array dense(mlx::core::cpu::CommandEncoder& encoder,
                              const mlx::core::array& a) {
  namespace mx = mlx::core;
  if (a.flags().row_contiguous) return a;
  mx::array c(a.shape(), a.dtype(), nullptr, {});
  c.set_data(mx::allocator::malloc(c.nbytes()));
  encoder.add_temporary(c);
  encoder.dispatch([src = a.data<char>(), dst = c.data<char>(), shape = a.shape(),
                    strides = a.strides(), size = a.size(), isz = a.itemsize()]() {
    for (size_t i = 0; i < size; ++i) {
      size_t rem = i;
      int64_t off = 0;
      for (int d = (int)shape.size() - 1; d >= 0; --d) {
        off += (int64_t)(rem % shape[d]) * strides[d];
        rem /= shape[d];
      }
      std::memcpy(dst + i * isz, src + off * (int64_t)isz, isz);
    }
  });
  return c;
}

}  // namespace bc_native
