"""A small PNG of an image for a chip or a message (Pillow scales it, so the window needs
no Qt image-format plugins for WebP or HEIC)."""

from __future__ import annotations

import io

from PIL import Image

from .image_data import ImageData


def thumbnail_png(image: ImageData, max_side: int) -> bytes:
    """PNG bytes of `image` scaled to fit in max_side x max_side (never enlarged)."""
    with Image.open(io.BytesIO(image.data)) as img:
        img.seek(0)
        small = img.convert("RGBA")
        small.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
        out = io.BytesIO()
        small.save(out, format="PNG")
        return out.getvalue()


def full_png(image: ImageData) -> bytes:
    """The image as PNG bytes (what the full-size view shows), or its own bytes when PNG."""
    if image.mime == "image/png":
        return image.data
    with Image.open(io.BytesIO(image.data)) as img:
        out = io.BytesIO()
        img.convert("RGBA").save(out, format="PNG")
        return out.getvalue()
