"""The chats the sidebar lists: each with its last activity and last message, one query."""

from __future__ import annotations

from dataclasses import dataclass

from app.storage.base import StoreBase

PREVIEW_CHARS = 200  # enough for one line of the sidebar; a long reply is not read whole

# Activity is the newest message's time (a chat's own row is stamped by opening, closing
# and pinning it, which are not activity); a chat with no messages counts from its making.
# The preview is the last message of the path shown (shown_leaf_id), else the newest.
_SQL = f"""
SELECT s.id, s.title, s.pinned, s.is_open,
       coalesce((SELECT max(m.updated_at) FROM messages m WHERE m.session_id = s.id),
                s.created_at) AS active,
       coalesce((SELECT substr(m.content, 1, {PREVIEW_CHARS}) FROM messages m
                  WHERE m.id = s.shown_leaf_id AND m.session_id = s.id),
                (SELECT substr(m.content, 1, {PREVIEW_CHARS}) FROM messages m
                  WHERE m.session_id = s.id ORDER BY m.seq DESC, m.created_at DESC LIMIT 1),
                '') AS preview,
       (SELECT count(*) FROM messages m WHERE m.session_id = s.id) AS messages
  FROM sessions s
 ORDER BY active DESC, s.id
"""


@dataclass(frozen=True, slots=True)
class ChatSummary:
    """One saved chat as the sidebar lists it (times are UTC ISO-8601 strings)."""

    id: str
    title: str
    pinned: bool
    is_open: bool
    last_active_at: str
    preview: str
    message_count: int


class ChatListMixin(StoreBase):
    def list_chats(self) -> list[ChatSummary]:
        """Every saved chat, most recently active first."""
        with self.reading() as db:
            rows = list(db.execute(_SQL).fetchall())
        return [ChatSummary(id_, title, bool(pinned), bool(is_open), active, preview or "",
                            count)
                for id_, title, pinned, is_open, active, preview, count in rows]
