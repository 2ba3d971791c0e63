"""A path to an Attachment or a Refused: the one entry the app, the API server and the tests
use. The size cap is checked on the file before reading it, so a 2 GB file is refused at
once, not read."""

from __future__ import annotations

from pathlib import Path

from ..plural import counted
from .attachment import Attachment, Part, RefusalReason, Refused, with_digest
from .documents import DocumentRefused, docx_parts, pdf_parts
from .folder import folder_parts
from .html_text import html_to_text
from .kinds import kind_of
from .text_decode import decode_text

DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # a file or a folder's files together


def size_text(n: int) -> str:
    """n bytes as a chip shows it: 812 bytes, 4.2 KB, 31.0 MB."""
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"


def _text_of(path: Path) -> str | None:
    """A plain or HTML file's text, None if it is not text."""
    text = decode_text(path.read_bytes())
    if text is not None and kind_of(path) == "html":
        return html_to_text(text)
    return text


def read_attachment(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES,
                    name: str | None = None) -> Attachment | Refused:
    """The file or folder at `path` read into text, or why it cannot be. `name` is what
    the chip and the prompt call it (default: the file's name)."""
    path = Path(path)
    name = name or path.name or str(path)
    try:
        if path.is_dir():
            return _read_folder(path, name, max_bytes)
        size = path.stat().st_size
    except FileNotFoundError:
        return Refused(name, RefusalReason.MISSING, "file not found")
    except OSError as e:
        return Refused(name, RefusalReason.UNREADABLE, f"cannot read: {e.strerror or e}")
    if size > max_bytes:
        return Refused(name, RefusalReason.TOO_LARGE,
                       f"{size_text(size)} is over the {size_text(max_bytes)} limit")
    kind = kind_of(path)
    try:
        if kind == "pdf":
            parts = pdf_parts(path)
        elif kind == "docx":
            parts = docx_parts(path)
        else:
            text = _text_of(path)
            if text is None:
                return Refused(name, RefusalReason.BINARY,
                               "not a text file, PDF or DOCX (binary content)")
            parts = (Part(text),)
    except DocumentRefused as e:
        return Refused(name, e.reason, e.message)
    except OSError as e:
        return Refused(name, RefusalReason.UNREADABLE, f"cannot read: {e.strerror or e}")
    return with_digest(Attachment(name, kind, size, parts))


def _read_folder(path: Path, name: str, max_bytes: int) -> Attachment | Refused:
    def text_or_none(p: Path) -> str | None:
        try:
            return _text_of(p) if kind_of(p) not in ("pdf", "docx") else None
        except OSError:
            return None

    parts, size, skipped = folder_parts(path, text_or_none, max_bytes)
    if not parts:
        return Refused(name, RefusalReason.NO_TEXT,
                       f"no text files in the folder ({counted(skipped, 'file')} skipped)")
    return with_digest(Attachment(name, "folder", size, parts, skipped))
