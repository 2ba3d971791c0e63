"""Sessions (chat tabs): save, list, restore, open/close/reorder, rename, delete."""

from __future__ import annotations

from app.storage.base import StoreBase
from app.storage.records import LoadedSession, Message, Session, SessionSummary, utc_now

_ORDER = "position, created_at, id"


class SessionsMixin(StoreBase):
    def save_session(self, session: Session) -> None:
        """Insert or update this session's own row (stamps updated_at). Its pin is left as
        it is (`set_pinned` changes it): a tab's saves never undo a pin made elsewhere."""
        session.updated_at = utc_now()
        row = session.to_row()
        del row["pinned"]
        self.upsert("sessions", row)

    def set_pinned(self, session_id: str, pinned: bool) -> None:
        """Pin a session (listed first in the sidebar) or unpin it."""
        self._update_session(session_id, pinned=int(pinned))

    def get_session(self, session_id: str) -> Session | None:
        with self.reading() as db:
            rows = list(db["sessions"].rows_where("id = ?", [session_id]))
        return Session.from_row(rows[0]) if rows else None

    def list_sessions(self, open_only: bool = False) -> list[Session]:
        """Sessions in tab order; open_only gives the tabs to restore at start."""
        where = "is_open = 1" if open_only else None
        with self.reading() as db:
            rows = list(db["sessions"].rows_where(where, order_by=_ORDER))
        return [Session.from_row(r) for r in rows]

    def list_history(self, limit: int | None = None) -> list[SessionSummary]:
        """All sessions, most recently active first, for the history view."""
        sql = """
            SELECT s.*, count(m.id) AS _count,
                   max(s.updated_at, coalesce(max(m.updated_at), '')) AS _active
            FROM sessions s LEFT JOIN messages m ON m.session_id = s.id
            GROUP BY s.id ORDER BY _active DESC, s.id
        """
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self.reading() as db:
            rows = list(db.query(sql))
        return [
            SessionSummary(
                Session.from_row({k: v for k, v in r.items() if not k.startswith("_")}),
                message_count=r["_count"],
                last_active_at=r["_active"],
            )
            for r in rows
        ]

    def load_session(self, session_id: str) -> LoadedSession:
        """A session with all its messages (every version) in seq order; raises KeyError if
        there is none. app.history.paths gives the path its tab shows."""
        with self.reading() as db:
            rows = list(db["sessions"].rows_where("id = ?", [session_id]))
            if not rows:
                raise KeyError(session_id)
            messages = list(db["messages"].rows_where(
                "session_id = ?", [session_id], order_by="seq, created_at, id"))
        files = self.message_attachments(m["id"] for m in messages)  # type: ignore[attr-defined]
        return LoadedSession(Session.from_row(rows[0]), [Message.from_row(m) for m in messages],
                             files)

    def rename_session(self, session_id: str, title: str) -> None:
        self._update_session(session_id, title=title)

    def open_session(self, session_id: str) -> None:
        """Mark a past session open again, as the last tab."""
        with self.atomic() as db:
            last = db.execute(
                "SELECT coalesce(max(position), -1) FROM sessions WHERE is_open = 1"
            ).fetchone()[0]
            self._update_session(session_id, is_open=1, position=last + 1)

    def close_session(self, session_id: str) -> None:
        """Close the tab; the session stays in the history."""
        self._update_session(session_id, is_open=0)

    def reorder_sessions(self, session_ids: list[str]) -> None:
        """Set tab positions to the order given (only the listed sessions change)."""
        with self.atomic() as db:
            for position, session_id in enumerate(session_ids):
                db.execute("UPDATE sessions SET position = ? WHERE id = ?",
                           [position, session_id])

    def delete_session(self, session_id: str) -> None:
        """Delete a session and its messages (cascade); its request stats are kept."""
        with self.atomic() as db:
            db.execute("DELETE FROM sessions WHERE id = ?", [session_id])
            # its messages' files (cascade) go; texts another chat still uses stay
            self._drop_unused_texts(db)  # type: ignore[attr-defined]

    def _update_session(self, session_id: str, **values: object) -> None:
        values["updated_at"] = utc_now()
        sets = ", ".join(f"{name} = :{name}" for name in values)
        with self.atomic() as db:
            db.execute(f"UPDATE sessions SET {sets} WHERE id = :id", {**values, "id": session_id})
