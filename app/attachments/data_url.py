"""A file sent inline, as OpenAI's `file` content part carries it (`file_data`: a base64
data URL), read as a file on disk would be: written to a private temporary folder under its
own name (the readers take paths, and the name's suffix picks the reader), then removed."""

from __future__ import annotations

import base64
import binascii
import re
import tempfile
from pathlib import Path, PurePath

from .attachment import Attachment, RefusalReason, Refused
from .read import DEFAULT_MAX_BYTES, read_attachment, size_text

_DATA_URL = re.compile(r"^data:([^;,]*)((?:;[^;,]*)*?);base64,(.*)$", re.S)
# a name without a suffix takes one from the media type, so the right reader reads it
SUFFIXES = {"application/pdf": ".pdf", "text/html": ".html", "text/markdown": ".md",
            "text/csv": ".csv", "application/json": ".json",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx"}


class BadDataUrl(ValueError):
    """`file_data` that is not a base64 data URL."""


def _safe_name(filename: str, media_type: str) -> str:
    name = PurePath(filename.replace("\\", "/")).name.strip() or "file"
    name = re.sub(r"[\x00-\x1f]", "", name)[:200]
    if name in ("", ".", ".."):
        name = "file"
    if not PurePath(name).suffix and media_type in SUFFIXES:
        name += SUFFIXES[media_type]
    return name


def read_data_url(filename: str | None, data_url: str, *,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> Attachment | Refused:
    """The file `data_url` carries, named `filename` (default: 'file' and a suffix from the
    media type); BadDataUrl if it is not a base64 data URL."""
    m = _DATA_URL.match(data_url)
    if m is None:
        raise BadDataUrl("must be a data URL: data:<media type>;base64,<data>")
    media_type = m.group(1).strip().lower()
    name = _safe_name(filename or "", media_type)
    payload = m.group(3)
    if len(payload) * 3 // 4 > max_bytes:  # refused before decoding it
        return Refused(name, RefusalReason.TOO_LARGE,
                       f"{size_text(len(payload) * 3 // 4)} is over the "
                       f"{size_text(max_bytes)} limit")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as e:
        raise BadDataUrl(f"its base64 data does not decode: {e}") from e
    with tempfile.TemporaryDirectory(prefix="batchchat-file-") as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        return read_attachment(path, max_bytes=max_bytes, name=name)
