"""What a read file is (Attachment: its text in parts that know their page or file) and what
a refused one is (Refused: the reason, in words a chip can show)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class RefusalReason(StrEnum):
    MISSING = "missing"  # no such file
    TOO_LARGE = "too_large"  # over the size cap
    BINARY = "binary"  # not text in any encoding, nor a format read here
    NO_TEXT = "no_text"  # a scanned PDF (no text layer), a folder without text files
    ENCRYPTED = "encrypted"  # a password-protected PDF
    UNREADABLE = "unreadable"  # a damaged PDF or DOCX, a permission error


@dataclass(frozen=True, slots=True)
class Refused:
    """A file that cannot be attached, and why (the chip shows `message`)."""

    name: str
    reason: RefusalReason
    message: str


@dataclass(frozen=True, slots=True)
class Part:
    """A stretch of an attachment's text that knows where it came from: a PDF's page
    (1-based), a folder's file (its path inside the folder), else neither."""

    text: str
    page: int | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file read into text. `kind` is the fence's language (markdown, python, csv, pdf,
    docx, html, text, folder); `size` the bytes on disk (a folder: its files read);
    `skipped` counts a folder's files left out (ignored or not text)."""

    name: str
    kind: str
    size: int
    parts: tuple[Part, ...]
    skipped: int = 0
    digest: str = field(default="")

    @property
    def text(self) -> str:
        """The whole text, parts joined by a blank line."""
        return "\n\n".join(p.text for p in self.parts)

    def content_hash(self) -> str:
        """sha256 of the text read (what an index is cached by)."""
        return self.digest or hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def with_digest(att: Attachment) -> Attachment:
    """The attachment with its content hash computed once."""
    return Attachment(att.name, att.kind, att.size, att.parts, att.skipped,
                      hashlib.sha256(att.text.encode("utf-8")).hexdigest())


def token_count(attachments: Sequence[Attachment], encode: Callable[[str], list[int]]) -> int:
    """Tokens the attachments take in the prompt, framed (the model's tokenizer)."""
    from .framing import frame

    return sum(len(encode(frame(a))) for a in attachments)
