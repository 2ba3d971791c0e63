import os
from pathlib import Path

import pytest

from app.storage import SafeStore, Session, StorageError, Store

GARBAGE = os.urandom(8192)


def write_garbage(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(GARBAGE)


def test_corrupt_file_is_moved_aside_never_deleted_and_a_new_one_started(db_file: Path) -> None:
    write_garbage(db_file)
    store = Store.open(db_file)
    try:
        [aside] = list(db_file.parent.glob("history.db.corrupt-*"))
        assert aside.read_bytes() == GARBAGE
        assert store.notice is not None and str(aside) in store.notice
        assert "damaged" in store.notice
        store.save_session(Session(title="fresh start"))
        assert [s.title for s in store.list_sessions()] == ["fresh start"]
    finally:
        store.close()


def test_safe_store_reports_the_recovery(db_file: Path) -> None:
    write_garbage(db_file)
    safe = SafeStore.open(db_file)
    assert safe.notice is not None and "moved to" in safe.notice
    assert safe.save_session(Session()) is True
    safe.close()


def test_read_only_open_of_a_corrupt_file_moves_nothing(db_file: Path) -> None:
    write_garbage(db_file)
    with pytest.raises(StorageError) as info:
        Store.open(db_file, read_only=True)
    assert info.value.kind == "corrupt"
    assert db_file.read_bytes() == GARBAGE
    assert not list(db_file.parent.glob("*.corrupt-*"))
