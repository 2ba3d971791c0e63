// Tiled attention with an online softmax for many query positions (long prompts).
#pragma once

#include "attention.h"

namespace bc_native {

// Same contract as attention_run (AVX2; its products on AVX-512 where the CPU has it, the
// head size is a multiple of 16 and `allow_avx512`). False when this CPU or head size
// cannot run it; the caller then uses attention_run's two-pass kernel.
bool attention_tiled_run(const AttnArgs& a, bool allow_avx512 = true);

}  // namespace bc_native
