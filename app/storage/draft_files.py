"""The files and images of a tab's unsent draft (issue #52), kept across a restart: the
same content-addressed texts as a sent message's (attachment_texts, app/storage/
attachments.py), named by draft_attachments rows keyed by the chat's session id. No
foreign key: an empty chat's session row goes at quit while its draft waits for the next
start (the Workspace puts it back, then in another chat if that one did not come back).
The draft's text stays in the settings file (app/workspace.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.storage.attachments import (
    MAX_KEPT_BYTES,
    drop_unused_texts,
    pack_parts,
    text_bytes,
    unpack_parts,
)
from app.storage.base import StoreBase


class DraftFilesMixin(StoreBase):
    def save_draft_files(self, session_id: str, files: Sequence[dict[str, Any]]) -> None:
        """The draft of chat `session_id` holds `files` now (app/attachments/stored.py's
        and app/images/stored.py's saved forms), in order; [] forgets them."""
        with self.atomic() as db:
            db.execute("DELETE FROM draft_attachments WHERE session_id = ?", [session_id])
            for position, f in enumerate(files):
                if f.get("parts") is None or text_bytes(f["parts"]) > MAX_KEPT_BYTES:
                    continue  # not kept: a draft's chip without its text is no use
                if db.execute("SELECT 1 FROM attachment_texts WHERE hash = ?",
                              [f["hash"]]).fetchone() is None:  # else not packed again
                    db.execute("INSERT INTO attachment_texts (hash, kind, size, data) "
                               "VALUES (?, ?, ?, ?)",
                               [f["hash"], f["kind"], f["size"], pack_parts(f["parts"])])
                db.execute(
                    "INSERT INTO draft_attachments (session_id, position, name, kind, size, "
                    "skipped, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [session_id, position, f["name"], f["kind"], f["size"],
                     f.get("skipped") or 0, f["hash"]])
            drop_unused_texts(db)

    def draft_files(self) -> dict[str, list[dict[str, Any]]]:
        """Every draft's files by session id, in order, in their saved form."""
        out: dict[str, list[dict[str, Any]]] = {}
        with self.reading() as db:
            rows = db.execute(
                "SELECT d.session_id, d.name, d.kind, d.size, d.skipped, d.hash, t.data "
                "FROM draft_attachments d JOIN attachment_texts t ON t.hash = d.hash "
                "ORDER BY d.session_id, d.position").fetchall()
        for session_id, name, kind, size, skipped, digest, data in rows:
            out.setdefault(session_id, []).append({
                "name": name, "kind": kind, "size": size, "skipped": skipped,
                "hash": digest, "parts": unpack_parts(data)})
        return out
