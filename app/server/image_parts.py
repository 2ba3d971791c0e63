"""OpenAI's `image_url` content parts on chat/completions (issue #52): each one checked and
read here (app/images: a base64 data URL; an http(s) URL is refused, the server runs
offline and fetches nothing, unless started with --allow-image-urls), passed on as a data
URL for a model that sees images, and refused as a 400 naming the part for one that reads
text only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..images import ImageRefused, image_from_url
from ..images.parts import image_part, image_parts
from ..images.refusal import TEXT_ONLY
from .errors import invalid


def has_images(body: Any) -> bool:
    """Whether a chat body's messages carry image parts (read off the loop, app.py)."""
    messages = body.get("messages") if isinstance(body, Mapping) else None
    return isinstance(messages, list) and any(
        isinstance(m, Mapping) and isinstance(m.get("content"), list)
        and any(isinstance(p, Mapping) and p.get("type") == "image_url" for p in m["content"])
        for m in messages)


def read_part(part: Mapping[str, Any], here: str, role: str) -> dict[str, Any]:
    """One `{"type": "image_url", "image_url": {"url"}}` part, checked and read: the part
    as passed on (its image as a data URL of what app.images keeps: a GIF's first frame
    and a HEIC as PNG). A 400 naming the part, with the reason, if it cannot be."""
    if role != "user":
        raise invalid(here, f"'{here}': only a user message may carry an image")
    spec = part.get("image_url")
    url = spec.get("url") if isinstance(spec, Mapping) else None
    if not isinstance(url, str):
        raise invalid(f"{here}.image_url", f"'{here}.image_url' must be an object with 'url' "
                                           "(a base64 data URL)")
    if spec.get("detail") not in (None, "auto", "low", "high"):  # the processor decides
        raise invalid(f"{here}.image_url.detail",
                      f"'{here}.image_url.detail' must be auto, low or high")
    try:
        return image_part(image_from_url(url))
    except ImageRefused as refused:
        raise invalid(f"{here}.image_url.url",
                      f"'{here}.image_url.url' cannot be used: {refused.reason}") from None


def refuse_if_text_only(messages: Sequence[Mapping[str, Any]] | None, sees_images: bool,
                        model: str) -> None:
    """A 400 naming the first image part when the model serving reads text only."""
    where = next(image_parts(messages or ()), None)
    if where is not None and not sees_images:
        raise invalid(where, f"'{where}' is an image, and the model '{model}' {TEXT_ONLY}: "
                             "send text only, or serve a vision model")
