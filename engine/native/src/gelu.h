// GELU (tanh approximation) times up: the MLP activation of the Gemma family, free of MLX
// headers. MLX's CPU backend runs nn.gelu_approx as a compiled graph of ~10 ops plus the
// product with up, each a pass over the row.
#pragma once

#include <cstdint>

namespace bc_native {

// y = gelu_tanh(g) * u elementwise, gelu_tanh(g) = 0.5 g (1 + tanh(z)), z = sqrt(2 / pi)
// (g + 0.044715 g^3), computed as g / (1 + exp(-2 z)) (0.5 (1 + tanh z) = sigmoid(2 z)).
// The portable loop and the AVX2 one give the same bits (the same Cephes exp, fused
// multiply-adds in the same places), so an element's value never depends on where it
// sits in the array: a row's result is the same alone or in a batch.
void gelu_tanh_mul_run(const float* g, const float* u, float* y, int64_t size,
                       bool force_scalar);

}  // namespace bc_native
