"""app/images: real Pillow-made PNG/JPEG/WebP/GIF (and HEIC) bytes are read, bad ones are
refused with a reason, data URLs round-trip and http(s) URLs are refused."""

from __future__ import annotations

import base64
import hashlib
import io

import pytest
from PIL import Image

from app.images import MAX_BYTES, ImageRefused, image_from_url, read_image, to_data_url
from app.images.read import HEIF
from app.images.thumbnail import full_png, thumbnail_png

from .image_bytes import animated_gif, encoded, huge_png_header, png


@pytest.mark.parametrize("fmt,mime", [("PNG", "image/png"), ("JPEG", "image/jpeg"),
                                      ("WEBP", "image/webp")])
def test_kept_formats_are_kept_as_given(fmt: str, mime: str) -> None:
    data = encoded(fmt, 64, 48)
    image = read_image(data)
    assert (image.mime, image.width, image.height) == (mime, 64, 48)
    assert image.data == data
    assert image.digest == hashlib.sha256(data).hexdigest()


def test_gif_is_its_first_frame_as_png() -> None:
    image = read_image(animated_gif())
    assert (image.mime, image.width, image.height) == ("image/png", 20, 10)
    with Image.open(io.BytesIO(image.data)) as img:
        assert img.format == "PNG"
        assert img.convert("RGB").getpixel((5, 5)) == (255, 0, 0)  # red: the first frame
    assert image.digest == hashlib.sha256(image.data).hexdigest()


@pytest.mark.skipif(not HEIF, reason="pillow-heif not installed")
def test_heic_is_read_as_png() -> None:
    out = io.BytesIO()
    Image.new("RGB", (32, 16), (0, 128, 255)).save(out, format="HEIF")
    image = read_image(out.getvalue())
    assert (image.mime, image.width, image.height) == ("image/png", 32, 16)


def test_same_bytes_same_digest_other_bytes_other_digest() -> None:
    assert read_image(png()).digest == read_image(png()).digest
    assert read_image(png()).digest != read_image(png(colour=(1, 2, 3))).digest


def test_text_bytes_are_refused_as_not_an_image() -> None:
    with pytest.raises(ImageRefused, match="not an image"):
        read_image(b"hello, this is plain text and not a picture\n" * 10)


def test_empty_bytes_are_refused() -> None:
    with pytest.raises(ImageRefused, match="empty"):
        read_image(b"")


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP"])
def test_truncated_bytes_are_refused(fmt: str) -> None:
    data = encoded(fmt, 256, 256)
    with pytest.raises(ImageRefused, match="damaged or truncated"):
        read_image(data[: len(data) // 2])


def test_a_20000_square_header_is_refused_before_decoding() -> None:
    with pytest.raises(ImageRefused, match="400,000,000 pixels.*40 megapixel limit"):
        read_image(huge_png_header())


def test_over_the_cap_below_pillows_guard_names_the_size() -> None:
    with pytest.raises(ImageRefused, match="8,000 x 6,000 pixels.*megapixel limit"):
        read_image(huge_png_header(8000, 6000))


def test_over_the_byte_cap_is_refused() -> None:
    with pytest.raises(ImageRefused, match="MiB image limit"):
        read_image(b"\x89PNG" + b"\0" * (MAX_BYTES + 1))


def test_data_url_round_trip() -> None:
    image = read_image(encoded("JPEG"))
    url = to_data_url(image)
    assert url.startswith("data:image/jpeg;base64,")
    assert image_from_url(url) == image


@pytest.mark.parametrize("url", ["https://example.com/cat.png", "http://10.0.0.1/a.jpg"])
def test_http_urls_are_refused_with_the_reason(url: str) -> None:
    with pytest.raises(ImageRefused, match="not fetched.*offline.*data URL"):
        image_from_url(url)


def test_bad_data_urls_are_refused() -> None:
    with pytest.raises(ImageRefused, match="base64 data URL"):
        image_from_url("data:image/png,rawbytes")
    with pytest.raises(ImageRefused, match="not valid base64"):
        image_from_url("data:image/png;base64,@@@@")
    text = base64.b64encode(b"just some text").decode()
    with pytest.raises(ImageRefused, match="not an image"):
        image_from_url(f"data:image/png;base64,{text}")


def test_thumbnail_fits_and_full_view_is_png() -> None:
    image = read_image(encoded("WEBP", 300, 100))
    with Image.open(io.BytesIO(thumbnail_png(image, 64))) as small:
        assert small.size == (64, 21)
    with Image.open(io.BytesIO(full_png(image))) as big:
        assert (big.format, big.size) == ("PNG", (300, 100))
