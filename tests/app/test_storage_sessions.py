from pathlib import Path

import pytest

from app.storage import Message, RequestStatsRecord, Session, Store

from .conftest import add_chat


def test_save_and_load_keep_every_field(store: Store) -> None:
    session = add_chat(store, "Rust", ("q", "a", "q2"))
    loaded = store.load_session(session.id)
    assert loaded.session == session
    assert [(m.seq, m.role, m.content) for m in loaded.messages] == [
        (0, "user", "q"), (1, "assistant", "a"), (2, "user", "q2")]
    assert loaded.messages[1].stats == {"generated_tokens": 5, "tokens_per_s": 41.5}
    assert loaded.messages[0].params == {"max_tokens": 64}
    assert loaded.session.params["stop"] == ["</s>"]


def test_messages_come_back_in_seq_order_not_insert_order(store: Store) -> None:
    session = Session()
    store.save_session(session)
    for seq in (2, 0, 1):
        store.save_message(Message(session_id=session.id, seq=seq, role="user", content=str(seq)))
    assert [m.content for m in store.load_session(session.id).messages] == ["0", "1", "2"]


def test_open_tabs_restore_in_order_after_reopen(store: Store, db_file: Path) -> None:
    a, b, c = (add_chat(store, t) for t in "abc")
    store.reorder_sessions([c.id, a.id, b.id])
    store.close_session(a.id)
    store.rename_session(c.id, "C!")
    store.close()
    reopened = Store.open(db_file)
    try:
        tabs = reopened.list_sessions(open_only=True)
        assert [(s.id, s.title) for s in tabs] == [(c.id, "C!"), (b.id, "b")]
        assert len(reopened.list_sessions()) == 3
        reopened.open_session(a.id)  # continue a past session: it becomes the last tab
        assert [s.id for s in reopened.list_sessions(open_only=True)] == [c.id, b.id, a.id]
    finally:
        reopened.close()


def test_history_lists_most_recent_first_with_counts(store: Store) -> None:
    old = add_chat(store, "old")
    new = add_chat(store, "new", ("x",))
    store.save_message(Message(session_id=old.id, seq=2, role="user", content="bump"))
    history = store.list_history()
    assert [(h.session.id, h.message_count) for h in history] == [(old.id, 3), (new.id, 1)]


def test_delete_cascades_to_messages_and_keeps_request_stats(store: Store) -> None:
    gone, kept = add_chat(store, "gone"), add_chat(store, "kept")
    store.record_request_stats(RequestStatsRecord(request_id="r1", session_id=gone.id))
    store.delete_session(gone.id)
    assert store.get_session(gone.id) is None
    assert store.db.execute("SELECT count(*) FROM messages WHERE session_id = ?",
                            [gone.id]).fetchone()[0] == 0
    assert len(store.load_session(kept.id).messages) == 2
    [stats] = store.list_request_stats()
    assert stats.request_id == "r1" and stats.session_id is None


def test_load_missing_session_raises_key_error(store: Store) -> None:
    with pytest.raises(KeyError):
        store.load_session("nope")
