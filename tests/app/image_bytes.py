"""Real image files made with Pillow for the image tests: each format's bytes, a header
claiming 20,000 x 20,000 pixels, truncated bytes."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image


def picture(width: int = 64, height: int = 48, colour: tuple[int, int, int] = (200, 60, 30)
            ) -> Image.Image:
    """An RGB picture with a gradient, so encoders have something to encode."""
    img = Image.new("RGB", (width, height), colour)
    for x in range(width):
        img.putpixel((x, x * height // max(width, 1)), (x * 4 % 256, 255, 0))
    return img


def encoded(fmt: str, width: int = 64, height: int = 48, **kw) -> bytes:
    out = io.BytesIO()
    picture(width, height).save(out, format=fmt, **kw)
    return out.getvalue()


def png(width: int = 64, height: int = 48, colour: tuple[int, int, int] = (200, 60, 30)
        ) -> bytes:
    out = io.BytesIO()
    picture(width, height, colour).save(out, format="PNG")
    return out.getvalue()


def animated_gif() -> bytes:
    """Two frames: red first, blue second."""
    frames = [Image.new("RGB", (20, 10), (255, 0, 0)), Image.new("RGB", (20, 10), (0, 0, 255))]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=100,
                   loop=0)
    return out.getvalue()


def huge_png_header(width: int = 20_000, height: int = 20_000) -> bytes:
    """A valid PNG signature and IHDR claiming width x height, with one tiny IDAT: what a
    decompression bomb's header looks like, without the bomb."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))
