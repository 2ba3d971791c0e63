// Tiled attention with an online softmax for many query positions (long prompts).
#pragma once

#include "attention.h"

namespace bc_native {

// Same contract as attention_run (AVX2 only). False when this CPU or head size cannot run
// it; the caller then uses attention_run's two-pass kernel.
bool attention_tiled_run(const AttnArgs& a);

}  // namespace bc_native
