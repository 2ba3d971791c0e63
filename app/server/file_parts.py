"""OpenAI's `file` content parts (`{"type": "file", "file": {"filename", "file_data": a
base64 data URL}}`) read into attachments (app/attachments/) for the request road, which
puts them in the prompt whole or retrieved. A file that cannot be read is a 400 naming its
part, with the reason (a scanned PDF, a binary, a password, the size cap)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..attachments import Attachment, Refused
from ..attachments.data_url import BadDataUrl, read_data_url
from .errors import invalid

_BLANK = {"type": "text", "text": ""}


def has_files(body: Any) -> bool:
    """Whether a chat body's messages carry file parts (read off the loop, app.py)."""
    messages = body.get("messages") if isinstance(body, Mapping) else None
    return isinstance(messages, list) and any(
        isinstance(m, Mapping) and isinstance(m.get("content"), list)
        and any(isinstance(p, Mapping) and p.get("type") == "file" for p in m["content"])
        for m in messages)


def take_files(value: Any, where: str, role: str) -> tuple[Any, tuple[Attachment, ...]]:
    """(`value` with its file parts blanked, so the text parts keep their indices in
    errors; the files read). Only a user message may carry files."""
    if not isinstance(value, list):
        return value, ()
    out: list[Any] = []
    files: list[Attachment] = []
    for j, part in enumerate(value):
        if not (isinstance(part, Mapping) and part.get("type") == "file"):
            out.append(part)
            continue
        here = f"{where}[{j}]"
        if role != "user":
            raise invalid(here, f"'{here}': only a user message may carry a file")
        spec = part.get("file")
        if not isinstance(spec, Mapping):
            raise invalid(f"{here}.file", f"'{here}.file' must be an object with 'file_data'")
        if spec.get("file_id") is not None:
            raise invalid(f"{here}.file.file_id",
                          f"'{here}.file.file_id': this server keeps no files; send "
                          "'file_data' (a base64 data URL)")
        data, name = spec.get("file_data"), spec.get("filename")
        if not isinstance(data, str):
            raise invalid(f"{here}.file.file_data",
                          f"'{here}.file.file_data' must be a base64 data URL")
        if name is not None and not isinstance(name, str):
            raise invalid(f"{here}.file.filename", f"'{here}.file.filename' must be a string")
        try:
            got = read_data_url(name, data)
        except BadDataUrl as e:
            raise invalid(f"{here}.file.file_data", f"'{here}.file.file_data' {e}") from None
        if isinstance(got, Refused):
            raise invalid(here, f"'{here}' ({got.name}) cannot be read: {got.message}")
        files.append(got)
        out.append(_BLANK)
    return out, tuple(files)
