"""A decoder's pooled hidden states as embeddings: mlx-lm's model body (the transformer
without its LM head) over right-padded inputs, mean-pooled over each input's own tokens,
L2-normalised.

Right padding with the body's causal mask is exact masking: a token attends only to the
tokens before it, so an input's real tokens never see the padding after them, and its
vector does not depend on the other inputs of its forward (up to the float rounding of a
different matrix shape: tests/server/test_embeddings.py measures it). Runs on
forward_thread's thread; MLX is imported here only, when an embedding is first asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Mean pooling: SmolLM2 and other chat decoders were not trained to put a text's meaning
# in its last token (Qwen3-Embedding was, and pools the last token); over the bundled model
# the mean separated related from unrelated texts more widely (docs/server.md has figures)
POOLINGS = ("mean", "last")
TOKEN_BUDGET = 8192  # padded tokens per forward: bounds the activations of one forward


def body_of(model: Any) -> Any | None:
    """The model's transformer body (hidden states out, no LM head), or None."""
    for owner in (model, getattr(model, "language_model", None)):
        body = getattr(owner, "model", None)
        if body is not None and hasattr(body, "embed_tokens"):
            return body
    return None


def _arg(model: Any, name: str) -> int | None:
    args = getattr(model, "args", None)
    value = getattr(args, name, None)
    if value is None:  # a multimodal model keeps its text model's sizes in text_config
        text = getattr(args, "text_config", None) or {}
        value = text.get(name) if isinstance(text, dict) else getattr(text, name, None)
    return value if isinstance(value, int) else None


def width_of(model: Any) -> int | None:
    """The hidden size: an embedding's length."""
    return _arg(model, "hidden_size")


def vocab_size_of(model: Any) -> int | None:
    return _arg(model, "vocab_size")


def batches(inputs: Sequence[Sequence[int]], budget: int = TOKEN_BUDGET) -> list[list[int]]:
    """The inputs' indexes grouped into forwards: by length (little padding), each group's
    padded size (longest x count) within `budget` (an input longer than it goes alone)."""
    order = sorted(range(len(inputs)), key=lambda i: len(inputs[i]))
    groups: list[list[int]] = []
    for i in order:
        group = groups[-1] if groups else None
        if group is not None and len(inputs[i]) * (len(group) + 1) <= budget:
            group.append(i)
        else:
            groups.append([i])
    return groups


def embed(model: Any, inputs: Sequence[Sequence[int]], dimensions: int | None = None,
          pooling: str = "mean", budget: int = TOKEN_BUDGET) -> list[list[float]]:
    """One unit vector per input, in the inputs' order; `dimensions`: the first that many
    components, renormalised (Matryoshka-style truncation)."""
    import mlx.core as mx

    body = body_of(model)
    out: list[list[float]] = [[] for _ in inputs]
    for group in batches(inputs, budget):
        longest = max(len(inputs[i]) for i in group)
        padded = mx.array([list(inputs[i]) + [0] * (longest - len(inputs[i])) for i in group])
        hidden = body(padded).astype(mx.float32)
        pooled = []
        for row, i in enumerate(group):
            n = len(inputs[i])
            pooled.append(hidden[row, :n].mean(axis=0) if pooling == "mean"
                          else hidden[row, n - 1])
        vectors = mx.stack(pooled)[:, :dimensions]
        vectors = vectors / mx.maximum(mx.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        mx.eval(vectors)
        for row, values in zip(group, vectors.tolist(), strict=True):
            out[row] = values
    return out
