"""An image as the history keeps it: in the attached files' tables of #51 (app/storage/
attachments.py: content-addressed by its sha256, compressed), as a file whose kind is
its media type and whose one part carries the bytes in base64 ("image"), so the journal,
the set-aside file and the JSON export carry it as text. A BatchChat from before reads
such a row as a file with no text (nothing breaks)."""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

from .image_data import ImageData

KIND_PREFIX = "image/"
NAMES = {"image/png": "image.png", "image/jpeg": "image.jpg", "image/webp": "image.webp"}


def is_saved_image(saved: dict[str, Any]) -> bool:
    return str(saved.get("kind", "")).startswith(KIND_PREFIX)


def to_saved(image: ImageData) -> dict[str, Any]:
    return {"name": NAMES.get(image.mime, "image"), "kind": image.mime,
            "size": len(image.data), "skipped": 0, "hash": image.digest,
            "parts": [{"text": "", "image": base64.b64encode(image.data).decode("ascii"),
                       "width": image.width, "height": image.height}]}


def from_saved(saved: dict[str, Any]) -> ImageData | None:
    """The image back (None: its bytes were not kept, or are not the bytes its hash
    names: a damaged or hand-edited row or export)."""
    parts = saved.get("parts") or []
    part = parts[0] if parts and isinstance(parts[0], dict) else {}
    try:
        data = base64.b64decode(str(part.get("image") or ""), validate=True)
    except (binascii.Error, ValueError):
        return None
    if not data or hashlib.sha256(data).hexdigest() != saved.get("hash"):
        return None
    return ImageData(str(saved["hash"]), str(saved["kind"]), int(part.get("width") or 0),
                     int(part.get("height") or 0), data)
