import sqlite3
from pathlib import Path

import pytest

from app.storage import Message, SafeStore, Session, StorageError, Store

from .conftest import add_chat


def hold_write_lock(path: Path) -> sqlite3.Connection:
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    return other


def test_write_while_another_process_holds_the_lock(store: Store) -> None:
    session = add_chat(store)
    other = hold_write_lock(store.path)
    try:
        with pytest.raises(StorageError) as info:
            store.rename_session(session.id, "renamed")
        assert info.value.kind == "locked" and "locked" in str(info.value)
        assert store.get_session(session.id).title == "Chat"  # WAL: reads still work
    finally:
        other.rollback()
        other.close()
    store.rename_session(session.id, "renamed")
    assert store.get_session(session.id).title == "renamed"


def test_safe_store_queues_while_locked_and_flushes_in_order(db_file: Path) -> None:
    safe = SafeStore.open(db_file, busy_timeout_s=0.1)
    other = hold_write_lock(db_file)
    session = Session(title="t")
    messages = [Message(session_id=session.id, seq=i, role="user", content=str(i))
                for i in range(3)]
    try:
        assert safe.save_session(session) is False
        assert [safe.save_message(m) for m in messages] == [False, False, False]
        assert safe.pending_count == 4 and safe.last_error.kind == "locked"
        assert safe.retry_pending() is False
    finally:
        other.rollback()
        other.close()
    assert safe.retry_pending() is True and safe.last_error is None
    assert [m.content for m in safe.reader.load_session(session.id).messages] == ["0", "1", "2"]
    safe.close()
