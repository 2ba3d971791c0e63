"""An export's attached files (#51: app/history/export.py attachments_doc) read back: each
message's files in order, their texts joined in, checked before anything is written so a
bad file adds nothing. A file whose text the export does not carry comes back not kept."""

from __future__ import annotations

from typing import Any

_REF = {"message_id": str, "name": str, "kind": str, "size": int, "skipped": int, "hash": str}
_TEXT = {"hash": str, "kind": str, "size": int, "parts": list}


def _checked(item: Any, shape: dict[str, type], where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise ValueError(f"{where} must be an object (got {type(item).__name__})")
    for name, kind in shape.items():
        value = item.get(name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"{where}: field {name} must be a {kind.__name__}")
    return item


def _part(p: Any, where: str) -> dict[str, Any]:
    if not (isinstance(p, dict) and isinstance(p.get("text"), str)
            and (p.get("page") is None or type(p.get("page")) is int)
            and (p.get("source") is None or isinstance(p.get("source"), str))):
        raise ValueError(f"{where} must be {{text, page, source}}")
    if "image" in p:  # an image (#52: app/images/stored.py), its bytes in base64
        if not (isinstance(p["image"], str) and all(
                type(p.get(k)) is int for k in ("width", "height"))):
            raise ValueError(f"{where} must be {{text, image, width, height}}")
        return {"text": p["text"], "image": p["image"], "width": p["width"],
                "height": p["height"]}
    return {"text": p["text"], "page": p.get("page"), "source": p.get("source")}


def files_by_message(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """message id -> its files ({"name", "kind", "size", "skipped", "hash", "parts"})."""
    refs, texts = doc.get("attachments", []), doc.get("attachment_texts", [])
    if not isinstance(refs, list) or not isinstance(texts, list):
        raise ValueError("attachments and attachment_texts must be lists")
    by_hash: dict[str, list[dict[str, Any]]] = {}
    for i, raw in enumerate(texts):
        text = _checked(raw, _TEXT, f"attachment_texts[{i}]")
        by_hash[text["hash"]] = [_part(p, f"attachment_texts[{i}].parts[{j}]")
                                 for j, p in enumerate(text["parts"])]
    out: dict[str, list[dict[str, Any]]] = {}
    for i, raw in enumerate(refs):
        ref = _checked(raw, _REF, f"attachments[{i}]")
        out.setdefault(ref["message_id"], []).append(
            {k: ref[k] for k in ("name", "kind", "size", "skipped", "hash")}
            | {"parts": by_hash.get(ref["hash"])})
    return out
