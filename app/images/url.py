"""Images in OpenAI `image_url` parts: a data URL read into an ImageData, and back. An
http(s) URL is refused (the server and the app run offline and fetch nothing) unless the
server was started with `--allow-image-urls`: then fetch.py fetches it."""

from __future__ import annotations

import base64
import binascii
import functools
import re

from .fetch import ENABLE_HINT, fetch_image, image_urls_allowed
from .image_data import ImageData, ImageRefused
from .read import MAX_BYTES, read_image

_DATA_URL = re.compile(r"^data:([^;,]*)((?:;[^;,]*)*?);base64,(.*)$", re.S)


def image_from_url(url: str) -> ImageData:
    """The image a data URL carries, or an http(s) URL's when fetching is allowed (blocking:
    called off the event loop); ImageRefused for a remote URL otherwise, or bad data."""
    if not isinstance(url, str) or not url:
        raise ImageRefused("image_url.url must be a data URL (data:image/png;base64,...)")
    scheme = url.split(":", 1)[0].lower()
    if scheme in ("http", "https"):
        if image_urls_allowed():
            return fetch_image(url)
        raise ImageRefused("http(s) image URLs are not fetched (the server runs offline): "
                           "send the image inline as a data URL (data:image/png;base64,...), "
                           f"or {ENABLE_HINT}")
    m = _DATA_URL.match(url)
    if m is None:
        raise ImageRefused("image_url.url must be a base64 data URL "
                           "(data:image/png;base64,...)")
    payload = m.group(3)
    if len(payload) * 3 // 4 > MAX_BYTES:  # refused before decoding it
        raise ImageRefused(f"over the {MAX_BYTES // 1024 // 1024} MiB image limit")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ImageRefused("image_url.url's base64 data is not valid base64") from None
    return read_image(data)


@functools.lru_cache(maxsize=16)
def to_data_url(image: ImageData) -> str:
    """`data:<mime>;base64,...` for an `image_url` part. Kept for the chat's latest images:
    a tab makes its prompt again for each token count and send, images and all."""
    return f"data:{image.mime};base64,{base64.b64encode(image.data).decode('ascii')}"
