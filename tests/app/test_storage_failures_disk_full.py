from pathlib import Path

import pytest

from app.storage import Message, SafeStore, StorageError, Store

from .conftest import add_chat


def fill_disk(store: Store) -> None:
    """No page may be added beyond the current size: what a full disk looks like."""
    pages = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count = {pages}")


def big_message(session_id: str, seq: int) -> Message:
    return Message(session_id=session_id, seq=seq, role="user", content="word " * 200_000)


def test_disk_full_is_reported_and_nothing_saved_is_lost(store: Store) -> None:
    session = add_chat(store)
    fill_disk(store)
    with pytest.raises(StorageError) as info:
        store.save_message(big_message(session.id, 2))
    assert info.value.kind == "disk_full" and "full" in str(info.value)
    assert [m.content for m in store.load_session(session.id).messages] == ["hi", "hello"]


def test_safe_store_keeps_the_write_until_space_returns(db_file: Path) -> None:
    store = Store.open(db_file)
    session = add_chat(store)
    fill_disk(store)
    safe = SafeStore(lambda: store)
    assert safe.save_message(big_message(session.id, 2)) is False
    assert safe.pending_count == 1 and safe.last_error.kind == "disk_full"
    assert safe.retry_pending() is False
    store.db.execute("PRAGMA max_page_count = 1073741823")
    assert safe.retry_pending() is True
    assert len(safe.reader.load_session(session.id).messages) == 3
    safe.close()
