"""Bytes into an ImageData, or ImageRefused with the reason. Pillow reads them; a HEIC too
where pillow-heif is installed. The pixel cap is checked from the header, before decoding,
so a 20,000 x 20,000 image costs nothing; the whole image is then decoded once, so a
truncated file is refused here rather than in the engine."""

from __future__ import annotations

import hashlib
import io
import re
import warnings

from PIL import Image, UnidentifiedImageError

from .image_data import ImageData, ImageRefused

MAX_BYTES = 20 * 1024 * 1024
# 40 megapixels: a phone photo (48 MP sensors bin to 12) or an 8K screenshot fits; VLM
# processors resize far below this anyway, so more only costs memory while decoding
MAX_PIXELS = 40_000_000
# kept as given; anything else (a GIF's first frame, HEIC, BMP, TIFF) becomes PNG, which
# every reader downstream (Qt, mlx-vlm's processors, a browser) takes
KEPT = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp"}

try:  # HEIC/HEIF photos (iPhone); optional: without it they are refused as not an image
    from pillow_heif import register_heif_opener

    register_heif_opener()
    HEIF = True
except ImportError:  # pragma: no cover - pillow-heif is a dependency, but a wheel may lack
    HEIF = False


def read_image(data: bytes) -> ImageData:
    """The image `data` holds; ImageRefused if it is not one, is truncated or too large."""
    if not data:
        raise ImageRefused("empty: no image data")
    if len(data) > MAX_BYTES:
        raise ImageRefused(f"{len(data) / 1024 / 1024:.1f} MiB is over the "
                           f"{MAX_BYTES // 1024 // 1024} MiB image limit")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise ImageRefused("not an image (PNG, JPEG, WebP, GIF"
                           + (", HEIC" if HEIF else "") + " are read)") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        # Pillow's own guard fires in open() above ~89 MP: its message has the pixel count
        found = re.search(r"\((\d+) pixels\)", str(e))
        raise ImageRefused(_too_many_pixels_text(int(found.group(1)) if found else None)
                           ) from None
    except OSError as e:  # a known format whose header or first bytes are cut or damaged
        raise ImageRefused(f"damaged or truncated image: {e}") from None
    with img:
        width, height = img.size
        if width * height > MAX_PIXELS:
            raise ImageRefused(_too_many_pixels_text(width * height, (width, height)))
        fmt = img.format or ""
        try:
            img.seek(0)  # a GIF's (or an animated WebP's) first frame
            img.load()
        except (OSError, SyntaxError, ValueError) as e:  # truncated, corrupt
            raise ImageRefused(f"damaged or truncated {fmt or 'image'}: {e}") from None
        if fmt in KEPT and not getattr(img, "is_animated", False):
            return _image(data, KEPT[fmt], width, height)
        return _image(_png(img), "image/png", width, height)


def _png(img: Image.Image) -> bytes:
    if img.mode not in ("RGB", "RGBA", "L", "LA", "P"):
        img = img.convert("RGBA" if "A" in img.getbands() else "RGB")
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def _image(data: bytes, mime: str, width: int, height: int) -> ImageData:
    return ImageData(hashlib.sha256(data).hexdigest(), mime, width, height, data)


def _too_many_pixels_text(pixels: int | None, size: tuple[int, int] | None = None) -> str:
    shown = (f"{size[0]:,} x {size[1]:,} pixels" if size
             else f"{pixels:,} pixels" if pixels else "its pixel count")
    return (f"too large: {shown} is over the {MAX_PIXELS / 1e6:.0f} megapixel limit "
            "(a vision model resizes far below it; scale it down first)")
