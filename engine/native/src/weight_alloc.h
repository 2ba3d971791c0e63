// Memory for a model's weights, allocated once at load and kept: big buffers are aligned to
// 2 MiB and, on Linux, asked for transparent huge pages, so the first touch faults once per
// 2 MiB instead of once per 4 KiB (a 1.5B model's load touched ~1e6 pages: a second of
// kernel time). Freed with std::free.
#pragma once

#include <cstddef>

namespace bc_native {

// `bytes` (at least 1) of uninitialized memory, or nullptr.
void* weight_alloc(size_t bytes);

// Asks for transparent huge pages on the whole 2 MiB pages inside [p, p + bytes), memory
// someone else allocated (MLX's allocator) and not yet written: a hint, nothing on other
// systems. Weights in huge pages also take fewer TLB misses at every decode step.
void advise_huge(void* p, size_t bytes);

}  // namespace bc_native
