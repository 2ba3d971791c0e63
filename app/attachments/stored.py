"""An attachment as the history keeps it (app/storage/attachments.py) and exports it: a
plain dict, {"name", "kind", "size", "skipped", "hash", "parts": [{"text", "page",
"source"}]}; "parts" None for a text the history did not keep (over its cap)."""

from __future__ import annotations

from typing import Any

from .attachment import Attachment, Part, RefusalReason, Refused


def to_saved(att: Attachment) -> dict[str, Any]:
    return {"name": att.name, "kind": att.kind, "size": att.size, "skipped": att.skipped,
            "hash": att.content_hash(),
            "parts": [{"text": p.text, "page": p.page, "source": p.source}
                      for p in att.parts]}


def from_saved(saved: dict[str, Any]) -> Attachment | Refused:
    """The attachment back, or a Refused saying its text was not kept."""
    if saved.get("parts") is None:
        return Refused(saved["name"], RefusalReason.TOO_LARGE,
                       "not kept in the history: its text was over the size cap")
    parts = tuple(Part(str(p.get("text", "")), p.get("page"), p.get("source"))
                  for p in saved["parts"])
    return Attachment(saved["name"], saved["kind"], int(saved["size"]), parts,
                      int(saved.get("skipped") or 0), saved.get("hash") or "")
