"""A chat's images as engine input (#52): OpenAI `image_url` parts (app/images/parts.py) made
the engine's `{"type": "image"}` parts, with the images' bytes beside the messages in the
same order (Engine.submit's `images`). A data URL that app/images refuses is refused here,
naming its part."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.public import RequestRejected

from ..images.image_data import ImageRefused
from ..images.parts import is_image_part, without_images
from ..images.url import image_from_url

ENGINE_IMAGE = {"type": "image"}  # where the chat template puts an image's tokens


def engine_images(messages: Sequence[Mapping[str, Any]],
                  ) -> tuple[list[dict[str, Any]], list[bytes]]:
    """(the messages with each image part made the engine's, the images' bytes in order);
    the messages as they are and [] when none has an image. RequestRejected names the part
    whose image app/images refuses (not an image, truncated, too large, an http URL)."""
    out: list[dict[str, Any]] = []
    images: list[bytes] = []
    for i, m in enumerate(messages):
        content = m.get("content")
        if not (isinstance(content, list) and any(map(is_image_part, content))):
            out.append(dict(m))
            continue
        parts: list[Any] = []
        for j, part in enumerate(content):
            if not is_image_part(part):
                parts.append(part)
                continue
            url = (part.get("image_url") or {}).get("url") \
                if isinstance(part.get("image_url"), Mapping) else None
            try:
                images.append(image_from_url(url).data)
            except ImageRefused as exc:
                raise RequestRejected(f"messages[{i}].content[{j}]: {exc.reason}") from None
            parts.append(dict(ENGINE_IMAGE))
        out.append(dict(m) | {"content": parts})
    return out, images


def for_target(messages: Sequence[Mapping[str, Any]], sees_images: bool,
               ) -> tuple[list[dict[str, Any]], list[bytes]]:
    """`engine_images` for a model that sees images; for one that reads text only, the
    messages without their images (a prompt count, saved KV) and no images."""
    if sees_images:
        return engine_images(messages)
    return without_images(messages), []
