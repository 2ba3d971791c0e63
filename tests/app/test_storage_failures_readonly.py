import os
import shutil
import subprocess
from pathlib import Path

import pytest

from app.storage import Message, SafeStore, Session, StorageError, Store

from .conftest import add_chat


def test_read_only_database_refuses_writes_with_a_clear_message(db_file: Path) -> None:
    store = Store.open(db_file)
    session = add_chat(store)
    store.close()
    ro = Store.open(db_file, read_only=True)
    try:
        assert ro.read_only
        with pytest.raises(StorageError) as info:
            ro.save_message(Message(session_id=session.id, seq=2, role="user", content="x"))
        assert info.value.kind == "read_only"
        assert str(db_file) in str(info.value) and "read-only" in str(info.value)
        assert len(ro.load_session(session.id).messages) == 2  # reads still work
    finally:
        ro.close()


def test_safe_store_keeps_writes_in_order_until_writable(db_file: Path) -> None:
    Store.open(db_file).close()
    read_only = True
    safe = SafeStore(lambda: Store.open(db_file, read_only=read_only))
    session = Session(title="written later")
    reply = Message(session_id=session.id, seq=0, role="assistant", is_complete=False)
    # The message depends on the session (foreign key): out of order would fail.
    assert safe.save_session(session) is False
    assert safe.save_message(reply) is False
    assert safe.checkpoint_message(reply.id, "par") is False
    assert safe.checkpoint_message(reply.id, "partial") is False  # replaces the queued one
    assert safe.pending_count == 3
    assert safe.last_error is not None and safe.last_error.kind == "read_only"
    assert safe.retry_pending() is False and safe.pending_count == 3

    read_only = False
    assert safe.retry_pending() is True
    assert safe.pending_count == 0 and safe.last_error is None
    [saved] = safe.reader.load_session(session.id).messages
    assert (saved.content, saved.is_complete) == ("partial", False)
    safe.close()


def _make_read_only(path: Path) -> None:
    if os.geteuid() != 0:
        path.chmod(0o444)
    elif shutil.which("chattr") and subprocess.run(
            ["chattr", "+i", str(path)], capture_output=True).returncode == 0:
        return
    else:
        pytest.skip("running as root without chattr: a file cannot be made read-only")


def _undo_read_only(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], check=False)
    path.chmod(0o644)


def test_read_only_file_on_disk(db_file: Path) -> None:
    store = Store.open(db_file)
    session = add_chat(store)
    store.close()
    _make_read_only(db_file)
    try:
        safe = SafeStore.open(db_file)
        assert safe.store is not None, safe.last_error
        assert len(safe.reader.load_session(session.id).messages) == 2
        assert safe.save_session(Session(title="later")) is False
        assert safe.last_error is not None and safe.last_error.kind == "read_only"
        safe.close()
    finally:
        _undo_read_only(db_file)
    reopened = SafeStore.open(db_file)
    assert reopened.save_session(Session(title="now")) is True
    reopened.close()
