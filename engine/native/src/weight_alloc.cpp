#include "weight_alloc.h"

#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace bc_native {

void* weight_alloc(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  if (bytes < 2 * kHuge) return std::malloc(bytes ? bytes : 1);
  void* p = nullptr;
  const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
  if (posix_memalign(&p, kHuge, rounded) != 0) return nullptr;
#if defined(MADV_HUGEPAGE)
  madvise(p, rounded, MADV_HUGEPAGE);  // a hint: without THP it is plain memory
#endif
  return p;
}

}  // namespace bc_native
