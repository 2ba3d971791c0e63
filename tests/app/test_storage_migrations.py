import hashlib
import sqlite3
from pathlib import Path

import pytest

from app.storage import SafeStore, SchemaTooNewError, Session, Store
from app.storage.migrations import MIGRATION_SET, schema_version

from .conftest import add_chat

TABLES = {"sessions", "messages", "request_stats", "stats_snapshots", "sim_runs", "sim_results"}


def applied(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT migration_set, name FROM _sqlite_migrations ORDER BY id").fetchall()


def test_fresh_database_gets_every_table_and_records_migrations(store: Store) -> None:
    assert TABLES <= set(store.db.table_names())
    assert len(applied(store.path)) == schema_version() >= 2
    assert store.db["messages"].foreign_keys[0].on_delete == "CASCADE"


def test_wal_foreign_keys_and_busy_timeout_are_on(store: Store) -> None:
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] == 200
    with sqlite3.connect(store.path) as other:  # WAL is a property of the file
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopen_is_idempotent_and_keeps_data(store: Store, db_file: Path) -> None:
    session = add_chat(store)
    before = applied(db_file)
    store.close()
    again = Store.open(db_file)
    try:
        assert applied(db_file) == before
        assert [m.content for m in again.load_session(session.id).messages] == ["hi", "hello"]
    finally:
        again.close()


def test_newer_schema_is_refused_and_file_left_untouched(db_file: Path) -> None:
    Store.open(db_file).close()
    with sqlite3.connect(db_file) as conn:
        conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                     "VALUES (?, 'm999_from_the_future', 'later')", [MIGRATION_SET])
    conn.close()
    digest = hashlib.sha256(db_file.read_bytes()).hexdigest()
    with pytest.raises(SchemaTooNewError) as info:
        Store.open(db_file)
    assert str(db_file) in str(info.value) and "newer version" in str(info.value)
    assert info.value.kind == "too_new"
    assert hashlib.sha256(db_file.read_bytes()).hexdigest() == digest


def test_safe_store_on_newer_schema_runs_from_memory(db_file: Path) -> None:
    Store.open(db_file).close()
    with sqlite3.connect(db_file) as conn:
        conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                     "VALUES (?, 'm999_from_the_future', 'later')", [MIGRATION_SET])
    conn.close()
    digest = hashlib.sha256(db_file.read_bytes()).hexdigest()
    safe = SafeStore.open(db_file)
    assert safe.store is None and safe.last_error is not None
    assert safe.last_error.kind == "too_new"
    assert safe.save_session(Session(title="kept")) is False
    assert safe.pending_count == 1
    assert hashlib.sha256(db_file.read_bytes()).hexdigest() == digest
