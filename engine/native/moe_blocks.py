"""A MoE block's weighted sum of its experts folded into the grouped down op (issue #48 (3)).

mlx-lm's Qwen3MoeSparseMoeBlock routes each row to its top k experts, runs them (a
SwitchGLU: gate and up, SwiGLU, down) and sums the k outputs weighted by their scores:
`(y * scores[..., None]).sum(axis=-2)`. On the engine's grouped experts
(engine/native/switch_layers.py) that was five ops a layer after the routing (gate+up,
SwiGLU, down, multiply, sum), each a pass over the pairs and an MLX op's overhead (~0.6 ms
of a 4 ms decode step at one row: docs/performance.md's MoE profile). Here the block's
call ends in two: gate and up with SwiGLU on the way out, down with the weighted sum of the
k slots on the way out (`SwitchGLU.weighted`), and the routing (softmax, top k, the scores
normalised) is one native op too (`native.moe_route`, src/moe_route.h). A row's routing and
its sum (in slot order, src/packed.h's kWeightedSum) come from its own logits and pairs
alone, so its bits do not depend on which rows share its experts.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models import qwen3_moe

from . import moe_route


class Qwen3MoeSparseMoeBlock(qwen3_moe.Qwen3MoeSparseMoeBlock):
    """mlx-lm's block with its weighted sum in the grouped down op where that can run."""

    def __call__(self, x: mx.array) -> mx.array:
        glu = self.switch_mlp
        weighted = getattr(glu, "weighted", None)
        if self.sharding_group is not None or weighted is None:
            return super().__call__(x)
        logits = self.gate(x)
        if logits.dtype == mx.float32:  # the routing in one native op
            inds, scores = moe_route(logits, self.top_k, bool(self.norm_topk_prob))
        else:  # the stock block's routing, as it is
            gates = mx.softmax(logits, axis=-1, precise=True)
            k = self.top_k
            inds = mx.stop_gradient(mx.argpartition(gates, kth=-k, axis=-1)[..., -k:])
            scores = mx.take_along_axis(gates, inds, axis=-1)
            if self.norm_topk_prob:
                scores /= mx.sum(scores, axis=-1, keepdims=True)
        y = weighted(x, inds, scores)
        if y is None:
            y = glu(x, inds)
            y = (y * scores[..., None]).sum(axis=-2).astype(y.dtype)
        return y


_BLOCKS = {qwen3_moe.Qwen3MoeSparseMoeBlock: Qwen3MoeSparseMoeBlock}


def engine_module(mod: nn.Module) -> nn.Module | None:
    """The engine's block for a MoE block of a class above, else None."""
    from ..module_tree import adopt

    cls = _BLOCKS.get(type(mod))
    return adopt(mod, cls) if cls is not None else None
