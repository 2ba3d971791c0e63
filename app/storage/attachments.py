"""A message's attached files in the history (issue #51). Texts are content-addressed: one
attachment_texts row per distinct text (its sha256), shared by every message that attached
it, compressed (zlib: text shrinks 3-5x). Kept in the database, not as files beside it:
the message and its files are written in one transaction, a backup or a move of the one
file takes them along, and nothing is left behind by a crash between two writes.

A text over MAX_KEPT_BYTES is not kept: the message keeps the file's name, kind, size and
hash (kept = 0), and a reopened chat shows it as not kept. Deleting a chat or a message
deletes the texts no other message uses."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

from app.storage.base import StoreBase

MAX_KEPT_BYTES = 32 * 1024 * 1024  # a text's UTF-8 bytes


def pack_parts(parts: Sequence[dict[str, Any]]) -> bytes:
    return zlib.compress(json.dumps(list(parts), ensure_ascii=False).encode("utf-8"), 6)


def unpack_parts(data: bytes) -> list[dict[str, Any]]:
    return json.loads(zlib.decompress(data).decode("utf-8"))


def text_bytes(parts: Sequence[dict[str, Any]]) -> int:
    return sum(len(str(p.get("text", "")).encode("utf-8")) for p in parts)


def write_files(db: Any, message_id: str, files: Sequence[dict[str, Any]]) -> None:
    """Inside a transaction: `message_id`'s files become `files` (see save_attachments)."""
    db.execute("DELETE FROM message_attachments WHERE message_id = ?", [message_id])
    for position, f in enumerate(files):
        kept = f.get("parts") is not None and text_bytes(f["parts"]) <= MAX_KEPT_BYTES
        if kept:
            db.execute("INSERT OR IGNORE INTO attachment_texts (hash, kind, size, data) "
                       "VALUES (?, ?, ?, ?)",
                       [f["hash"], f["kind"], f["size"], pack_parts(f["parts"])])
        db.execute(
            "INSERT INTO message_attachments (message_id, position, name, kind, size, "
            "skipped, hash, kept) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [message_id, position, f["name"], f["kind"], f["size"], f.get("skipped") or 0,
             f["hash"], int(kept)])


def drop_unused_texts(db: Any) -> None:
    """Texts no message attaches any more, nor an unsent draft (app/storage/draft_files.py)."""
    db.execute("DELETE FROM attachment_texts WHERE hash NOT IN "
               "(SELECT hash FROM message_attachments) AND hash NOT IN "
               "(SELECT hash FROM draft_attachments)")


class AttachmentsMixin(StoreBase):
    def save_attachments(self, message_id: str, files: Sequence[dict[str, Any]]) -> None:
        """A message's files, in order: each {"name", "kind", "size", "skipped", "hash",
        "parts": [{"text", "page", "source"}]} (app/attachments/stored.py makes them).
        Replaces what the message had; a text already kept is not written again."""
        with self.atomic() as db:
            write_files(db, message_id, files)
            drop_unused_texts(db)

    def message_attachments(self, message_ids: Iterable[str]
                            ) -> dict[str, list[dict[str, Any]]]:
        """Each message's files in order (messages without any left out); a file whose
        text was not kept has "parts": None."""
        ids = list(message_ids)
        out: dict[str, list[dict[str, Any]]] = {}
        with self.reading() as db:
            for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit
                chunk = ids[start:start + 500]
                rows = db.execute(
                    "SELECT a.message_id, a.name, a.kind, a.size, a.skipped, a.hash, a.kept, "
                    "t.data FROM message_attachments a LEFT JOIN attachment_texts t "
                    f"ON t.hash = a.hash WHERE a.message_id IN ({','.join('?' * len(chunk))}) "
                    "ORDER BY a.message_id, a.position", chunk).fetchall()
                for mid, name, kind, size, skipped, digest, kept, data in rows:
                    out.setdefault(mid, []).append({
                        "name": name, "kind": kind, "size": size, "skipped": skipped,
                        "hash": digest,
                        "parts": unpack_parts(data) if kept and data is not None else None})
        return out

    def attachment_text_count(self) -> int:
        """Distinct texts kept (what the deduplication tests count)."""
        with self.reading() as db:
            return db.execute("SELECT COUNT(*) FROM attachment_texts").fetchone()[0]

    @staticmethod
    def _drop_unused_texts(db: Any) -> None:
        drop_unused_texts(db)
