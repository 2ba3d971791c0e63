"""Gemma 4's image tokens that attend to each other both ways (issue #52).

Gemma 4 12B / 26B / 31B set `use_bidirectional_attention: "vision"`: each image's run of
tokens is a block whose tokens see each other both ways, the rest of the prompt causal.
mlx-vlm 0.7.10's gemma4 (what the engine runs) lays that block over the causal mask of
every layer, sliding-window and full alike (`_apply_blockwise_bidirectional_overlay`, a
block's tokens seeing each other even beyond the window); transformers' Gemma 4
(`create_masks_for_vision_model`) over the sliding-window layers only. The engine follows
mlx-vlm, whose generate is the answer its tests compare with (docs/loader.md says so).

An image's earlier tokens read its later ones in every layer, so their keys and values
past the first layer depend on the whole image: an image split across two prefill chunks
cannot be made right by any mask of the second chunk (the first chunk's KV would already
be wrong). So the scheduler never splits one (`whole_blocks`), and a chunk's mask needs
only its own blocks (engine/vision/image_mask.py): every key before the chunk is earlier
than its queries, seen causally. A prefix restored into the middle of an image (its KV
made by a pass over the whole image) is right too: the rest of that image is one chunk.

No MLX here: the scheduler asks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Block = tuple[int, int]  # [start, end) of one image's tokens in the prompt


def bidirectional(model_type: str | None, text: Mapping[str, Any]) -> bool:
    """Whether a VLM's image tokens attend both ways (its text config `text`)."""
    return model_type == "gemma4" and text.get("use_bidirectional_attention") == "vision"


def blocks(token_ids: Sequence[int], image_token_id: int) -> tuple[Block, ...]:
    """Each maximal run of image tokens, as mlx-vlm's `_block_sequence_ids_for_mask`
    groups them (two images with nothing between them would be one block, as there)."""
    runs: list[Block] = []
    for i, t in enumerate(token_ids):
        if t != image_token_id:
            continue
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    return tuple(runs)


def whole_blocks(found: Sequence[Block], start: int, n: int) -> int:
    """The size of a chunk from `start` of at most `n` tokens (more where it must) that
    splits no block: one that would end inside a block ends before it, or, where the
    chunk starts in or at that block, at its end (so every chunk makes progress)."""
    end = start + n
    for a, b in found:
        if a < end < b:
            return a - start if a > start else b - start
    return n


def within(found: Sequence[Block], start: int, n: int) -> tuple[Block, ...]:
    """The parts of the blocks inside the chunk [start, start + n), relative to it (the
    chunk's own tokens seeing each other; the keys before it are seen causally)."""
    out = []
    for a, b in found:
        lo, hi = max(a, start), min(b, start + n)
        if hi - lo > 1:
            out.append((lo - start, hi - start))
    return tuple(out)
