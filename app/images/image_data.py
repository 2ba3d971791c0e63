"""What a read image is (ImageData) and what refusing one says (ImageRefused)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ImageData:
    """An image as a chat carries it: `data` is PNG, JPEG or WebP bytes (a GIF's first frame
    and a HEIC are stored as PNG), `digest` the sha256 hex of `data` (the history's and the
    prefix cache's key), `mime` its media type."""

    digest: str
    mime: str
    width: int
    height: int
    data: bytes = b""

    def __repr__(self) -> str:  # never the bytes
        return (f"ImageData({self.mime}, {self.width}x{self.height}, {len(self.data)} bytes, "
                f"{self.digest[:12]})")


class ImageRefused(ValueError):
    """Bytes that cannot be a chat's image; `reason` is said where the image was given (the
    input box, an API 400)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
