"""M-RoPE (Qwen2-VL / Qwen2.5-VL): image tokens at 3-D positions, the text after them shifted.

Qwen's language model rotates each query and key by three positions, (time, height, width),
each for its own share of the frequencies (mlx-vlm's `mrope_position_selector`). A text
token has all three equal to its position, so its rotation is plain RoPE's; an image's
tokens take (t, h, w) on the image's grid, and the text after an image goes on from the
image's largest position + 1: its position is its index in the prompt plus the prompt's
`rope_delta` (negative: an image of h x w tokens spans max(h, w) positions). mlx-vlm's
`get_rope_index` computes both (`rope_positions`).

In the engine each pass says its positions through the model's `PositionFeed`: a lone image
request's prompt chunk its (3, L) positions, a step's rows each its delta (0 for text
rows). Every rotation of the model, whatever pass it is in, is the same per-token op on its
three positions (`MRoPE._rotate`), so a token's key has the same bits prefilled with the
image, decoded after it, or prefilled again after a cache hit: the same-answer guarantee.
The ragged pass carries one position a token and no delta, so a tick holding an image
request's rows or chunks runs its passes apart (ModelRunner.may_share); text rows share
ragged passes as with any model.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from .. import cpu_kernels, native
from ..ragged_pass import Positions

# families whose language model takes 3-D positions, and how their frequencies are laid out
# among the three (mlx-vlm's style names)
MROPE_STYLES = {"qwen2_vl": "chunked", "qwen2_5_vl": "chunked", "qwen3_vl": "interleaved",
                "qwen3_vl_moe": "interleaved"}
# the language model class of each (mlx-lm's own, on the VLM's arrays)
TEXT_MODELS = {"qwen2_vl": "qwen2", "qwen2_5_vl": "qwen2", "qwen3_vl": "qwen3",
               "qwen3_vl_moe": "qwen3_moe"}


class PositionFeed:
    """What the next pass's M-RoPE modules read: set by the runner around one pass."""

    def __init__(self) -> None:
        self.positions: mx.array | None = None  # (3, L): a lone image prompt chunk's
        self.shifts: mx.array | None = None  # (rows,): each row's rope delta
        # DeepStack (engine/vision/deepstack.py): a lone chunk's rows of each level
        self.levels: tuple[mx.array, ...] | None = None

    @contextmanager
    def feeding(self, positions: mx.array | None = None, shifts: mx.array | None = None,
                levels: tuple[mx.array, ...] | None = None) -> Iterator[None]:
        self.positions, self.shifts, self.levels = positions, shifts, levels
        try:
            yield
        finally:
            self.positions = self.shifts = self.levels = None

    @property
    def busy(self) -> bool:
        return self.positions is not None or self.shifts is not None


class MRoPE(nn.Module):
    """The rotation of Qwen2-VL's language model on the engine's passes: three positions a
    token, each on its frequencies (the others rotate by 0, which leaves a pair as it is),
    on the native RoPE op where the engine's kernels run, in MLX ops otherwise."""

    def __init__(self, dims: int, base: float, selector: Sequence[int],
                 feed: PositionFeed) -> None:
        super().__init__()
        half = dims // 2
        inv = native.rope_inv_freq(dims, base)
        axes = [mx.array([float(s == a) for s in selector[:half]], dtype=mx.float32) * inv
                for a in range(3)]
        mx.eval(axes)
        # not parameters: the model's weights and their names stay mlx-lm's
        object.__setattr__(self, "_dims", dims)
        object.__setattr__(self, "_axes", axes)
        object.__setattr__(self, "feed", feed)

    def __call__(self, x: mx.array, offset: int | mx.array | Positions = 0) -> mx.array:
        feed = self.feed
        if isinstance(offset, Positions):  # a ragged pass: text rows only (no delta)
            p = offset.array
            return self._rotate(x.swapaxes(0, 2), (p, p, p)).swapaxes(0, 2)
        if feed.positions is not None:  # a lone chunk (1, H, L, D): a token a row
            p = feed.positions
            return self._rotate(x.swapaxes(0, 2), (p[0], p[1], p[2])).swapaxes(0, 2)
        if feed.shifts is not None:
            offset = offset + feed.shifts[: x.shape[0]]
        return self._rotate(x, (offset, offset, offset))

    def _rotate(self, x: mx.array, offsets: tuple[Any, Any, Any]) -> mx.array:
        """x (B, H, L, D) with each row's three first positions (ints or (B,) arrays)."""
        if cpu_kernels.native_rowwise(x) is not None:
            for inv, off in zip(self._axes, offsets, strict=True):
                x = native.rope(x, self._dims, traditional=False, scale=1.0, offset=off,
                                inv_freq=inv)
            return x
        steps = mx.arange(x.shape[2])
        angles = sum((mx.reshape(mx.array(off) if not isinstance(off, mx.array) else off,
                                 (-1, 1)) + steps)[:, None, :, None].astype(mx.float32) * inv
                     for inv, off in zip(self._axes, offsets, strict=True))
        cos, sin = mx.cos(angles), mx.sin(angles)
        half = self._dims // 2
        a, b, rest = x[..., :half], x[..., half:self._dims], x[..., self._dims:]
        return mx.concatenate([a * cos - b * sin, a * sin + b * cos, rest], axis=-1)


def install(model: nn.Module, model_type: str, text: dict[str, Any]) -> PositionFeed | None:
    """Put `MRoPE` modules in place of every attention's `rope` in `model` (the engine's
    text model of a VLM of `model_type`, built here, not mlx-lm's module); returns their
    feed, or None for a family without M-RoPE."""
    from mlx_vlm.models.rope_utils import get_mrope_section, mrope_position_selector

    style = MROPE_STYLES.get(model_type)
    if style is None:
        return None
    heads = int(text["num_attention_heads"])
    dims = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
    section = get_mrope_section(rope_scaling=text.get("rope_scaling"),
                                rope_parameters=text.get("rope_parameters"))
    selector = mrope_position_selector(style, section, dims // 2).tolist()
    base = float(text.get("rope_theta", 1_000_000.0))
    feed = PositionFeed()
    for _, module in model.named_modules():
        if "rope" in module and isinstance(module["rope"], nn.Module):
            module["rope"] = MRoPE(dims, base, selector, feed)
    return feed


def feed_of(model: nn.Module) -> PositionFeed | None:
    """The feed of a model's M-RoPE modules (None: none)."""
    for _, module in model.named_modules():
        if isinstance(module, MRoPE):
            return module.feed
    return None


def rope_positions(vlm: nn.Module, token_ids: list[int],
                   arrays: dict[str, Any]) -> tuple[mx.array, int]:
    """An image prompt's (3, L) positions and its rope delta, by mlx-vlm's get_rope_index."""
    grid = arrays.get("image_grid_thw")
    positions, deltas = vlm.language_model.get_rope_index(
        mx.array([token_ids]), grid if grid is None or isinstance(grid, mx.array)
        else mx.array(grid))
    positions = positions[:, 0, :].astype(mx.int32)
    mx.eval(positions)
    return positions, int(mx.array(deltas).reshape(-1)[0].item())


def placed(seq: Any) -> bool:
    """Whether a sequence is an image request of an M-RoPE model (its positions are not
    its indices)."""
    vision = getattr(seq, "vision", None)
    return vision is not None and getattr(vision, "positions", None) is not None


def shifts(seqs: Sequence[Any]) -> mx.array | None:
    """The rows' rope deltas, None when every row's is 0."""
    deltas = [seq.vision.rope_delta if placed(seq) else 0 for seq in seqs]
    return mx.array(deltas, dtype=mx.int32) if any(deltas) else None
