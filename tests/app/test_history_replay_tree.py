"""Set-aside writes and chat trees: lines written now carry each message's parent and are
replayed with it (and a replayed session never undoes a pin); lines set aside by the
version before trees (a real file and database written by the code at c68b04b) still
replay, each message following the one before it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from app.history.paths import shown_messages
from app.history.writer import HistoryWriter
from app.storage import Message, SafeStore, Session, Store
from app.storage.set_aside import read, set_aside_path
from ui.history import words

from .test_history_replay import locked

OLD = Path(__file__).parent / "data" / "set-aside-before-trees"
OLD_IDS = [f"dddddddd-0000-4000-8000-00000000000{i}" for i in range(4)]


def test_writes_set_aside_before_trees_replay_as_one_path(tmp_path: Path) -> None:
    for name in ("history.db", "history.db.set-aside.jsonl"):
        shutil.copy(OLD / name, tmp_path / name)
    db = tmp_path / "history.db"
    assert all("parent_id" not in e["args"][0] for e in read(set_aside_path(db)))
    sync = HistoryWriter.open(db)  # migrates the old database, then replays
    assert "3 messages (in 1 chat)" in (words.notice(sync.status()) or "")
    assert sync.close()
    store = Store.open(db, read_only=True)
    loaded = store.load_session("33333333-3333-4333-8333-333333333333")
    store.close()
    assert loaded.session.title == "before trees, renamed"
    assert [(m.id, m.parent_id) for m in loaded.messages] == [
        (OLD_IDS[0], None), (OLD_IDS[1], OLD_IDS[0]), (OLD_IDS[2], OLD_IDS[1]),
        (OLD_IDS[3], OLD_IDS[2])]
    assert [m.content for m in shown_messages(loaded)] == [
        "q1", "a1 so far, finished", "q2", "a2"]


def test_writes_set_aside_now_carry_parents_and_replay_them(db_file: Path) -> None:
    chat = Session(title="tree")
    q = Message(session_id=chat.id, seq=0, role="user", content="q")
    a = Message(session_id=chat.id, seq=1, role="assistant", content="a", parent_id=q.id)
    b = Message(session_id=chat.id, seq=2, role="assistant", content="b", parent_id=q.id)
    q2 = Message(session_id=chat.id, seq=3, role="user", content="q2", parent_id=b.id)
    store = SafeStore.open(db_file, busy_timeout_s=0.05)  # the test writes as the writer would
    sync = HistoryWriter(store)
    assert store.save_session(chat) and store.save_message(q)
    assert store.set_pinned(chat.id, True)
    with locked(store):
        for m in (a, b, q2):
            store.save_message(m)
        # the tab shows the first version; a fresh record (as the app makes) says
        # pinned=False: the pin stays
        store.save_session(Session(title="tree", id=chat.id, shown_leaf_id=a.id,
                                        created_at=chat.created_at))
        assert not sync.close(set_aside=True)
    lines = read(set_aside_path(db_file))
    assert [e["args"][0].get("parent_id") for e in lines[:3]] == [q.id, q.id, b.id]
    assert lines[3]["args"][0]["shown_leaf_id"] == a.id
    sync = HistoryWriter.open(db_file)
    assert "3 messages (in 1 chat)" in (words.notice(sync.status()) or "") and sync.close()
    store = Store.open(db_file, read_only=True)
    loaded = store.load_session(chat.id)
    store.close()
    assert [(m.id, m.parent_id) for m in loaded.messages] == [
        (q.id, None), (a.id, q.id), (b.id, q.id), (q2.id, b.id)]
    assert loaded.session.shown_leaf_id == a.id and loaded.session.pinned is True
    assert [m.content for m in shown_messages(loaded)] == ["q", "a"]
    assert json.dumps(lines)  # plain JSON lines
