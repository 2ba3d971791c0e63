"""Messages: a finished one is saved whole; a streaming reply is checkpointed."""

from __future__ import annotations

from app.storage.base import StoreBase
from app.storage.records import Message, utc_now


class MessagesMixin(StoreBase):
    def save_message(self, message: Message) -> None:
        """Insert or update this message's own row (stamps updated_at).

        Call it when a message is sent, when a reply starts (is_complete=False, so a
        crash leaves a visible partial reply) and when the reply finishes."""
        message.updated_at = utc_now()
        self.upsert("messages", message.to_row())

    def checkpoint_message(self, message_id: str, content: str,
                           reasoning: str | None = None) -> None:
        """Store the text streamed so far (call every ~2 s), and a reasoning model's
        thinking so far where it has some (None leaves the row's as it is).

        Only touches a reply that is still incomplete, so a late checkpoint can never
        overwrite a finished message; token ids belong to the finished text, so any the
        row held are dropped with the old content. Raises KeyError if the reply was never
        saved."""
        with self.atomic() as db:
            cursor = db.execute(
                "UPDATE messages SET content = ?, reasoning = COALESCE(?, reasoning), "
                "token_ids = NULL, updated_at = ? WHERE id = ? AND is_complete = 0",
                [content, reasoning, utc_now(), message_id],
            )
            if cursor.rowcount == 0 and not db.execute(
                "SELECT 1 FROM messages WHERE id = ?", [message_id]
            ).fetchone():
                raise KeyError(message_id)

    def list_messages(self, session_id: str) -> list[Message]:
        """Every message of the chat, all versions, in the order made (seq); the path a
        tab shows is app.history.paths.shown_path."""
        with self.reading() as db:
            rows = db["messages"].rows_where(
                "session_id = ?", [session_id], order_by="seq, created_at, id")
            return [Message.from_row(r) for r in rows]

    def delete_message(self, message_id: str) -> None:
        """Remove one message (e.g. a reply about to be regenerated)."""
        with self.atomic() as db:
            db.execute("DELETE FROM messages WHERE id = ?", [message_id])
            self._drop_unused_texts(db)  # type: ignore[attr-defined]
