"""Images inside chat messages, as OpenAI's content parts: a user message's `content` is a
list, its text part first and then one `{"type": "image_url", "image_url": {"url": a data
URL}}` per image (the window builds them, the API server passes a client's through).
Helpers for the request road that reads a message's text or strips its images."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .image_data import ImageData
from .url import to_data_url

IMAGE_PART = "image_url"


def image_part(image: ImageData) -> dict[str, Any]:
    return {"type": IMAGE_PART, "image_url": {"url": to_data_url(image)}}


def with_images(text: str, images: Sequence[ImageData]) -> str | list[dict[str, Any]]:
    """A user message's content: `text` alone, or its text part and then its images."""
    if not images:
        return text
    return [{"type": "text", "text": text}, *(image_part(i) for i in images)]


def is_image_part(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == IMAGE_PART


def text_of(content: Any) -> str:
    """A message's text: the string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content
                       if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def with_text(content: Any, text: str) -> str | list[Any]:
    """`content` with its text replaced by `text` (images kept after it)."""
    if not isinstance(content, list):
        return text
    return [{"type": "text", "text": text}, *(p for p in content if is_image_part(p))]


def image_parts(messages: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """Where each image is: 'messages[i].content[j]' (the API's refusal names it)."""
    for i, m in enumerate(messages):
        content = m.get("content")
        if isinstance(content, list):
            for j, part in enumerate(content):
                if is_image_part(part):
                    yield f"messages[{i}].content[{j}]"


def has_images(messages: Sequence[Mapping[str, Any]] | None) -> bool:
    return next(image_parts(messages or ()), None) is not None


def without_images(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages with their images left out (their text as a string): what a text-only
    model's prompt count or saved KV is made from."""
    return [dict(m) | {"content": text_of(m.get("content"))}
            if isinstance(m.get("content"), list) and any(map(is_image_part, m["content"]))
            else dict(m) for m in messages]
