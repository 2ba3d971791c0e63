"""Rows that another program or a hand edit left odd (a JSON column that is not JSON or
not of its kind, stats numbers that are text) load with those values left out: the
chats still come back at start instead of the app failing (issue #15: every place data
enters the program). Real SQLite files edited with a second connection."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.history.writer import HistoryWriter
from app.storage import Message, Session, Store

from .history_sync_helpers import start_bridge


def make_chats(db: Path) -> tuple[Session, Session]:
    store = Store.open(db)
    odd, fine = Session(title="odd", position=0), Session(title="fine", position=1)
    for s in (odd, fine):
        store.save_session(s)
        store.save_message(Message(session_id=s.id, seq=0, role="user", content="q"))
        store.save_message(Message(session_id=s.id, seq=1, role="assistant", content="a",
                                   stats={"generated_tokens": 3, "ttft_s": 0.1}))
    store.close()
    return odd, fine


async def test_odd_rows_load_with_the_odd_values_left_out(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    odd, fine = make_chats(db)
    other = sqlite3.connect(db)
    with other:
        other.execute("UPDATE sessions SET params = '{not json' WHERE id = ?", [odd.id])
        other.execute("UPDATE messages SET stats = ?, token_ids = '\"abc\"' "
                      "WHERE session_id = ? AND seq = 1",
                      ['{"generated_tokens": "many", "ttft_s": "soon"}', odd.id])
        other.execute("UPDATE messages SET params = '[1,' WHERE session_id = ? AND seq = 0",
                      [odd.id])
    other.close()
    bridge = await start_bridge()
    try:
        sync = HistoryWriter.open(db)
        convs = sync.restore(bridge)
        assert [c.title for c in convs] == ["odd", "fine"]
        assert convs[0].params == {}
        reply = convs[0].messages[1]
        assert (reply.content, reply.stats, reply.token_ids) == ("a", None, None)
        assert convs[0].messages[0].params is None
        assert convs[1].messages[1].stats.generated_tokens == 3
        assert sync.close()
    finally:
        await bridge.shutdown(timeout=2.0)
