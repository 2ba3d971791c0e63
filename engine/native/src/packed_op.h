// MLX side of packed.h: packing a quantized weight once, and the packed int8 product of x
// with one or more packed weights as one CPU primitive.
#pragma once

#include <optional>
#include <vector>

#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace bc_native {

namespace mx = mlx::core;

// (w, scales, biases) from mx.quantize (affine, bits 4 or 8, group 32 or 64) in the packed
// layout: [weights uint8 (panels * 16, K * bits / 8), scales and biases float32 (panels,
// K / group_size, 16)]. Evaluates its inputs; the result is a copy (the originals stay).
std::vector<mx::array> pack_quantized(const mx::array& w, const mx::array& scales,
                                      const mx::array& biases, int group_size, int bits);

// x @ W_i.T for each packed (weights, scales, biases) in `packed`, N_i = ns[i] outputs, in
// one op: x (..., K) rounded to int8 once. Outputs float32 (..., N_i), x's dtype if other.
// form: packed.h's Form of every weight (kQ4K: group 32, bits 4; kQ6K: group 16, bits 6;
// kQ5K: group 32, bits 5). `layouts`: each weight's own (group_size, bits, form), three ints
// a weight (a Q4_K_M file's Q4_K q and k beside a Q6_K v, in one op); empty: all as above.
std::vector<mx::array> packed_matvec_many(const mx::array& x, const std::vector<mx::array>& packed,
                                          const std::vector<int>& ns, int group_size, int bits,
                                          bool force_scalar = false, int form = 0,
                                          const std::vector<int>& layouts = {},
                                          mx::StreamOrDevice s = {});

// pack_quantized for stacked experts: w (E, N, K * bits / 32), scales and biases (E, N,
// K / group_size); each expert packed as one matrix, one after another: [weights uint8
// (E * panels * 16, K * bits / 8), scales and biases float32 (E * panels, K / group_size,
// 16)].
std::vector<mx::array> pack_experts(const mx::array& w, const mx::array& scales,
                                    const mx::array& biases, int group_size, int bits);

// MoE: out_i (M, k, N_i), pair (m, j) = x[m, X == 1 ? 0 : j] @ W_i[indices[m, j]].T for each
// pack_experts triple in `packed`, x (M, X, K) with X 1 or k, indices (M, k) integers below
// `experts`. The pairs run grouped by expert (packed.h's packed_run_experts): each pair's
// result is the bits its row gets alone. `out` (packed.h's ExpertsOut): kSwiGLU, two triples
// of one N, one output (M, k, N) silu(gate) * up; kWeightedSum, one triple, one output
// (M, N), the pairs summed in slot order weighted by slot_weights (M, k) floats.
std::vector<mx::array> packed_experts_matvec(const mx::array& x, const mx::array& indices,
                                             const std::vector<mx::array>& packed,
                                             const std::vector<int>& ns, int experts,
                                             int group_size, int bits, bool force_scalar = false,
                                             int form = 0, int out = 0,
                                             const std::optional<mx::array>& slot_weights = {},
                                             mx::StreamOrDevice s = {});

class PackedExpertsMatvec : public mx::Primitive {
 public:
  PackedExpertsMatvec(mx::Stream stream, std::vector<int> ns, int experts, int group_size,
                      int bits, bool force_scalar, int form, int out)
      : mx::Primitive(stream),
        ns_(std::move(ns)),
        experts_(experts),
        group_size_(group_size),
        bits_(bits),
        force_scalar_(force_scalar),
        form_(form),
        out_(out) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  const char* name() const override { return "PackedExpertsMatvec"; }
  bool is_equivalent(const mx::Primitive& other) const override;
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override;

 private:
  std::vector<int> ns_;
  int experts_;
  int group_size_;
  int bits_;
  bool force_scalar_;
  int form_;
  int out_;
};

class PackedMatvec : public mx::Primitive {
 public:
  // layouts: (group_size, bits, form) of each weight, three ints a weight
  PackedMatvec(mx::Stream stream, std::vector<int> ns, std::vector<int> layouts,
               bool force_scalar)
      : mx::Primitive(stream),
        ns_(std::move(ns)),
        layouts_(std::move(layouts)),
        force_scalar_(force_scalar) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  const char* name() const override { return "PackedMatvec"; }
  bool is_equivalent(const mx::Primitive& other) const override;
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override;

 private:
  std::vector<int> ns_;
  std::vector<int> layouts_;
  bool force_scalar_;
};

}  // namespace bc_native
