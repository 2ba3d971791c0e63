"""Bytes to text for plain files: UTF-8 (with or without BOM) when it decodes, else the
encoding charset-normalizer detects; None for bytes that are not text (a NUL in the first
block, or no encoding fits), so an image or an executable is refused, not shown as noise."""

from __future__ import annotations

from charset_normalizer import from_bytes

_SNIFF = 8192


def looks_binary(data: bytes) -> bool:
    """A NUL byte early on: no text encoding used for documents puts one there (UTF-16
    does, and is caught by its BOM first)."""
    head = data[:_SNIFF]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False
    return b"\x00" in head


def decode_text(data: bytes) -> str | None:
    """The text of `data`, or None when it is not text."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    if looks_binary(data):
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    best = from_bytes(data).best()
    if best is None:
        return None
    return str(best)
