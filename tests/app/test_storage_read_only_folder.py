"""A history file in a folder that cannot be written (issue #15, item 3): a WAL database
cannot be opened normally there (SQLite cannot create its -shm file), so it is opened
read-only and immutable: past chats show, changes wait in memory, and `move_to` saves
everything, past and new, to another file. Real files in a really read-only folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.storage import Message, SafeStore, Session, StorageError, Store

from .conftest import add_chat
from .test_storage_failures_readonly import _make_read_only, _undo_read_only


@pytest.fixture
def locked_folder(db_file: Path):
    store = Store.open(db_file)
    session = add_chat(store, "before")
    store.close()
    _make_read_only(db_file.parent)
    try:
        yield session
    finally:
        _undo_read_only(db_file.parent)
        db_file.parent.chmod(0o755)


def test_past_chats_show_from_a_read_only_folder(db_file: Path, locked_folder) -> None:
    safe = SafeStore.open(db_file)
    assert safe.store is not None, safe.last_error
    assert safe.store.read_only
    assert safe.notice is not None and "read-only" in safe.notice
    assert "Past chats are shown" in safe.notice
    [loaded] = safe.reader.list_sessions()
    assert loaded.title == "before"
    assert [m.content for m in safe.reader.load_session(loaded.id).messages] == ["hi", "hello"]
    assert safe.save_session(Session(title="new")) is False  # kept in memory
    assert safe.pending_count == 1 and safe.last_error.kind == "read_only"
    safe.close()


def test_move_to_saves_past_and_queued_changes_elsewhere(db_file: Path, tmp_path: Path,
                                                         locked_folder) -> None:
    safe = SafeStore.open(db_file)
    new = Session(title="written in memory")
    safe.save_session(new)
    safe.save_message(Message(session_id=new.id, seq=0, role="user", content="kept"))
    assert safe.pending_count == 2
    elsewhere = tmp_path / "elsewhere" / "history.db"
    assert safe.move_to(elsewhere) is True
    assert safe.pending_count == 0 and safe.last_error is None
    assert safe.save_message(Message(session_id=new.id, seq=1, role="user", content="later"))
    safe.close()
    other = Store.open(elsewhere)
    try:
        titles = sorted(s.title for s in other.list_sessions())
        assert titles == ["before", "written in memory"]
        assert [m.content for m in other.load_session(new.id).messages] == ["kept", "later"]
        assert [m.content for m in other.load_session(locked_folder.id).messages] == [
            "hi", "hello"]
    finally:
        other.close()


def test_move_to_a_folder_that_cannot_be_written_changes_nothing(db_file: Path,
                                                                 locked_folder) -> None:
    safe = SafeStore.open(db_file)
    safe.save_session(Session(title="waiting"))
    with pytest.raises(StorageError) as info:
        safe.move_to(db_file.parent / "other.db")
    assert str(db_file.parent / "other.db") in str(info.value)
    assert safe.pending_count == 1 and safe.store is not None
    assert [s.title for s in safe.reader.list_sessions()] == ["before"]
    safe.close()


def test_a_wal_that_cannot_be_read_there_is_named(tmp_path: Path) -> None:
    """A crash left changes in the -wal file, and its -shm is gone: opened immutable, the
    history shows what the main file holds and the notice names the -wal file."""
    import shutil
    import sqlite3

    source = tmp_path / "source"
    source.mkdir()
    store = Store.open(source / "h.db")
    add_chat(store, "merged")
    store.close()
    writer = sqlite3.connect(source / "h.db")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    with writer:
        writer.execute("UPDATE sessions SET title = 'only in the wal'")
    folder = tmp_path / "data"
    folder.mkdir()
    for name in ("h.db", "h.db-wal"):  # a copy as a crash leaves it, without the -shm
        shutil.copy(source / name, folder / name)
    writer.close()
    assert (folder / "h.db-wal").stat().st_size > 0
    _make_read_only(folder)
    try:
        safe = SafeStore.open(folder / "h.db")
        assert [s.title for s in safe.reader.list_sessions()] == ["merged"]
        assert safe.notice is not None and str(folder / "h.db-wal") in safe.notice
        safe.close()
    finally:
        _undo_read_only(folder)
        folder.chmod(0o755)
