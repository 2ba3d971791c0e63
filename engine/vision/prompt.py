"""An image request's prompt: its ids, its images as the model's processor takes them, and
its embeddings (the vision tower's pass), all through mlx-vlm's own code.

`VisionTower.prepare` (at submit, on the caller's thread: the chat template, the processor's
decoding and resizing, unless made off the loop just before: prepared.py) refuses what the
processor cannot take with a reason; `VisionTower.embed` (at admission, on the engine
thread) runs mlx-vlm's `get_input_embeddings`: the text embeddings with the image features
merged at the image tokens.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from ..errors import RequestRejected
from .deepstack import StackedRows, stacked
from .image_blocks import blocks
from .keys import image_ids
from .mrope import rope_positions
from .prepared import PreparedPrompts


@dataclass(frozen=True, slots=True)
class VisionPrompt:
    """What an image request's prefill needs: `ids` (the prompt's ids, image tokens keyed by
    their image: engine/vision/keys.py), `token_ids` (the real ids, for the merge), the
    processor's arrays, and where its last image token ends."""

    ids: list[int]
    token_ids: list[int]
    arrays: dict[str, Any]  # pixel_values and the like, as mlx-vlm's processor made them
    images_end: int  # one past the last image token: a prefix cached past it needs no tower
    # M-RoPE (engine/vision/mrope.py): every prompt token's (t, h, w), (3, tokens), and the
    # delta from a token's index to its position after the prompt; None / 0 elsewhere
    positions: Any = None
    rope_delta: int = 0
    # each image's tokens, where they attend to each other both ways (Gemma 4's
    # use_bidirectional_attention "vision": image_blocks.py); () elsewhere
    blocks: tuple[tuple[int, int], ...] = ()


class VisionTower:
    """A loaded VLM's image side: mlx-vlm's model (its vision tower, connector and merge)
    and processor."""

    def __init__(self, vlm: nn.Module, processor: Any, image_token_id: int,
                 positioned: bool = False, bidirectional: bool = False) -> None:
        self.vlm = vlm
        self.positioned = positioned  # M-RoPE: prompts carry their 3-D positions
        self.bidirectional = bidirectional  # an image's tokens see each other both ways
        self.processor = processor
        self.image_token_id = image_token_id
        self.tokenizer = getattr(processor, "tokenizer", processor)
        # Pixtral / Mistral 3 lay an image out as rows of image tokens with a break token
        # between rows: one image, one run of keys (_keyed)
        brk = getattr(processor, "image_break_token", None)
        self.break_token_id = (self.tokenizer.convert_tokens_to_ids(brk)
                               if isinstance(brk, str) else None)
        self._prepared = PreparedPrompts()

    def prepare(self, messages: Sequence[Mapping[str, Any]], images: Sequence[bytes],
                template_kwargs: Mapping[str, Any] | None = None) -> VisionPrompt:
        """The prompt of `messages` whose `{"type": "image"}` parts stand, in order, for
        `images` (encoded files). RequestRejected names what is wrong. The processor's
        work is kept for the last few prompts (prepared.py): asked again for the same
        text and images (a submit after a count made off the loop), it is not redone."""

        parts = sum(1 for m in messages if isinstance(m.get("content"), list)
                    for p in m["content"] if isinstance(p, Mapping) and p.get("type") == "image")
        if parts != len(images):
            raise RequestRejected(f"the messages have {parts} image part(s) but "
                                  f"{len(images)} image(s) were given")
        for i, data in enumerate(images):
            if not isinstance(data, (bytes, bytearray)):
                raise RequestRejected(f"image {i + 1}: expected the file's bytes, got "
                                      f"{type(data).__name__}")
        try:
            text = self.tokenizer.apply_chat_template(
                [dict(m) for m in messages], add_generation_prompt=True, tokenize=False,
                **dict(template_kwargs or {}))
        except Exception as exc:  # noqa: BLE001 - a template that cannot take these parts
            raise RequestRejected(f"the chat template cannot place the images: {exc}") from None
        digests = [hashlib.sha256(data).hexdigest() for data in images]
        key = (text, *digests)
        made = self._prepared.get(key)  # made off the loop before (prepared.py)
        if made is None:
            made = self._processed(text, images, digests)
            self._prepared.put(key, made)
        # lists of its own: a Sequence's prompt ids are its to keep
        return replace(made, ids=list(made.ids), token_ids=list(made.token_ids))

    def _processed(self, text: str, images: Sequence[bytes],
                   digests: list[str]) -> VisionPrompt:
        """The processor's work (decoding, resizing, patching): the slow part of prepare."""
        from mlx_vlm.utils import process_inputs

        pictures = [_decoded(i, data) for i, data in enumerate(images)]
        try:
            out = process_inputs(self.processor, prompts=[text], images=pictures)
        except Exception as exc:  # noqa: BLE001 - whatever the processor refuses
            raise RequestRejected(f"the model's image processor cannot take the image(s): "
                                  f"{type(exc).__name__}: {exc}") from None
        token_ids = [int(t) for t in _rows(out["input_ids"])[0]]
        # (the attention mask goes to get_input_embeddings as `mask`, as mlx-vlm's generate
        # hands it: Gemma 3's merge reads it)
        arrays = {("mask" if k == "attention_mask" else k): v for k, v in out.items()
                  if k != "input_ids" and v is not None}
        ids, end = self._keyed(token_ids, digests)
        if end == 0:
            raise RequestRejected("the model's processor put no image tokens in the prompt")
        if self.bidirectional:
            return VisionPrompt(ids, token_ids, arrays, end,
                                blocks=blocks(token_ids, self.image_token_id))
        if not self.positioned:
            return VisionPrompt(ids, token_ids, arrays, end)
        positions, delta = rope_positions(self.vlm, token_ids, arrays)
        return VisionPrompt(ids, token_ids, arrays, end, positions, delta)

    def _keyed(self, token_ids: list[int], digests: list[str]) -> tuple[list[int], int]:
        """The prompt ids with each image token replaced by its key, and one past the last
        image token. Each run of image tokens (rows joined by the processor's break token,
        which is keyed with them: it is fed from the image's embeddings like them) is one
        image where the runs and the images are as many (most processors); otherwise every
        image token is keyed by all the images together (sound, though a follow-up adding an
        image then reuses less)."""
        runs: list[tuple[int, int]] = []
        for i, t in enumerate(token_ids):
            if t == self.image_token_id:
                if runs and (runs[-1][1] == i or (runs[-1][1] == i - 1 and
                                                  token_ids[i - 1] == self.break_token_id)):
                    runs[-1] = (runs[-1][0], i + 1)  # (a row break inside an image: keyed too)
                else:
                    runs.append((i, i + 1))
        ids = list(token_ids)
        if not runs:
            return ids, 0
        one_each = len(runs) == len(digests)
        seen = 0
        for j, (a, b) in enumerate(runs):
            # keyed by the images so far: a later image never changes an earlier one's keys
            key = ":".join(digests[:j + 1] if one_each else digests)
            ids[a:b] = image_ids(hashlib.sha256(key.encode()).hexdigest(), seen + b - a)[seen:]
            seen = 0 if one_each else seen + b - a
        return ids, runs[-1][1]

    def embed(self, prompt: VisionPrompt) -> mx.array | StackedRows:
        """The prompt's embeddings, (tokens, hidden), evaluated: mlx-vlm's
        get_input_embeddings (the vision tower, its connector, the merge); with the
        DeepStack levels' rows beside them where the model has any (deepstack.py)."""
        arrays = {k: as_mx(v) for k, v in prompt.arrays.items()}
        got = self.vlm.get_input_embeddings(mx.array([prompt.token_ids]), **arrays)
        embeds = getattr(got, "inputs_embeds", got)[0]
        mx.eval(embeds)
        return stacked(embeds, got)


def as_mx(value: Any) -> Any:
    """A processor's array as MLX's; a list of them (Gemma 4's images of different sizes,
    which its tower takes one by one) as a list of MLX arrays."""
    if isinstance(value, (list, tuple)):
        return [as_mx(v) for v in value]
    return value if isinstance(value, mx.array) else mx.array(value)


def _rows(ids: Any) -> list[list[int]]:
    return ids.tolist() if hasattr(ids, "tolist") else [list(r) for r in ids]


def _decoded(index: int, data: bytes) -> Any:
    """Image `index` (0-based) decoded by Pillow as RGB (a GIF's first frame), or refused:
    not an image, truncated, or past Pillow's decompression-bomb threshold (its warning
    taken as an error: ~89 M pixels), before the processor resizes it."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            picture = Image.open(io.BytesIO(data))
            picture.load()
            return picture.convert("RGB")
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise RequestRejected(f"image {index + 1}: too many pixels ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - not an image, truncated, unknown format
        raise RequestRejected(f"image {index + 1}: not a readable image ({exc})") from None
