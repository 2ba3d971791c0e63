// Memory for a model's weights, allocated once at load and kept: big buffers are aligned to
// 2 MiB and, on Linux, asked for transparent huge pages, so the first touch faults once per
// 2 MiB instead of once per 4 KiB (a 1.5B model's load touched ~1e6 pages: a second of
// kernel time). Freed with std::free.
#pragma once

#include <cstddef>

namespace bc_native {

// `bytes` (at least 1) of uninitialized memory, or nullptr.
void* weight_alloc(size_t bytes);

}  // namespace bc_native
