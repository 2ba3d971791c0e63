import hashlib
import sqlite3
from pathlib import Path

import pytest
from sqlite_utils import Database

from app.storage import SafeStore, SchemaTooNewError, Session, Store
from app.storage.migrations import MIGRATION_SET, migrations, schema_version

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


def test_a_database_from_before_conversation_memory_is_migrated(db_file: Path) -> None:
    # The file as the previous version left it: schema up to m002, rows written then.
    db_file.parent.mkdir(parents=True)
    old = Database(db_file)
    migrations.apply(old, stop_before="m003_message_token_ids")
    assert [m.name for m in migrations.applied(old)] == ["m001_tables", "m002_search"]
    old["sessions"].insert({"id": "s", "title": "old chat", "system_prompt": "",
                            "params": "{}", "position": 0, "is_open": 1,
                            "created_at": "2025-01-01", "updated_at": "2025-01-01"})
    old["messages"].insert({"id": "m", "session_id": "s", "seq": 0, "role": "assistant",
                            "content": "an old reply", "is_complete": 1,
                            "created_at": "2025-01-01", "updated_at": "2025-01-01"})
    old["request_stats"].insert({"id": "r", "request_id": "req", "message_id": "m",
                                 "prompt_tokens": 9, "finished_at": "2025-01-01"})
    old.close()

    store = Store.open(db_file)
    try:
        assert [name for _, name in applied(db_file)][-2:] == [
            "m003_message_token_ids", "m004_request_stats_cached_tokens"]
        [message] = store.list_messages("s")
        assert (message.content, message.token_ids) == ("an old reply", None)
        [stats] = store.list_request_stats()
        assert (stats.prompt_tokens, stats.cached_tokens) == (9, 0)
        message.token_ids = [5, 6, 7]  # the new columns take new values
        store.save_message(message)
        assert store.list_messages("s")[0].token_ids == [5, 6, 7]
        assert [h.id for h in store.search("old reply")] == ["s"]  # search index intact
    finally:
        store.close()
