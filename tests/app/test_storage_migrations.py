import hashlib
import sqlite3
from pathlib import Path

import pytest
from sqlite_utils import Database

from app.storage import RequestStatsRecord, SafeStore, SchemaTooNewError, Session, Store
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
        names = [name for _, name in applied(db_file)]
        assert names[2:4] == ["m003_message_token_ids", "m004_request_stats_cached_tokens"]
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


V4_DB = Path(__file__).parent / "data" / "history-v4.db"  # written by the version before #29
RUST, CLOSED, EMPTY = ("3cb350ee-c45e-4876-ab3d-a0efa2f6f46d",
                       "cd6b8f24-dc7c-4474-9de6-94c21187f3e8",
                       "f144740b-cc66-48c6-9d59-4bca7971958c")


def test_a_database_written_before_trees_becomes_one_path_per_chat(tmp_path: Path) -> None:
    db_file = tmp_path / "history.db"
    db_file.write_bytes(V4_DB.read_bytes())
    before = {r[0]: r[1:] for r in sqlite3.connect(db_file).execute(
        "SELECT id, session_id, seq, role, content, is_complete, params, stats, token_ids "
        "FROM messages")}
    assert len(applied(db_file)) == 4

    store = Store.open(db_file)
    try:
        assert [name for _, name in applied(db_file)][4:6] == ["m005_message_tree",
                                                              "m006_message_tool_calls"]
        rust = store.load_session(RUST)
        assert [m.content for m in rust.messages] == [
            "What is a lifetime in Rust?", "A lifetime names how long a reference is valid.",
            "Show an example.", "fn first<'a>(s: &'a str) -> &'a str { s }"]
        # each message follows the one before it: the chat is the single path it was
        ids = [m.id for m in rust.messages]
        assert [m.parent_id for m in rust.messages] == [None, *ids[:-1]]
        assert (rust.session.shown_leaf_id, rust.session.pinned) == (None, False)
        assert (rust.session.preset, rust.session.params["seed"]) == ("Balanced", 7)
        assert rust.messages[1].token_ids == [1, 2, 3]
        closed = store.load_session(CLOSED)
        assert [m.parent_id for m in closed.messages] == [None, closed.messages[0].id]
        assert not closed.messages[1].is_complete and not closed.session.is_open
        assert store.load_session(EMPTY).messages == []
        # every column the old version wrote is unchanged
        after = {r[0]: r[1:] for r in sqlite3.connect(db_file).execute(
            "SELECT id, session_id, seq, role, content, is_complete, params, stats, "
            "token_ids FROM messages")}
        assert after == before
        assert [s.request_id for s in store.list_request_stats()] == ["req-1"]
        assert {h.id for h in store.search("lifetime")} == {RUST}
        assert all(m.tool_calls is None and m.tool_results is None for m in rust.messages)
    finally:
        store.close()


def test_a_database_from_before_tool_calls_gains_their_columns(db_file: Path) -> None:
    """A file at m005 (issue #29's schema): m006 adds the messages' tool_calls and
    tool_results; its rows read back with none, and a reply saved now keeps its calls."""
    db_file.parent.mkdir(parents=True)
    old = Database(db_file)
    migrations.apply(old, stop_before="m006_message_tool_calls")
    assert [m.name for m in migrations.applied(old)][-1] == "m005_message_tree"
    assert "tool_calls" not in old["messages"].columns_dict
    old["sessions"].insert({"id": "s", "title": "a tree", "system_prompt": "",
                            "params": "{}", "position": 0, "is_open": 1,
                            "created_at": "2026-01-01", "updated_at": "2026-01-01"})
    old["messages"].insert({"id": "m", "session_id": "s", "seq": 0, "role": "assistant",
                            "content": "a reply", "is_complete": 1, "parent_id": None,
                            "created_at": "2026-01-01", "updated_at": "2026-01-01"})
    old.close()

    store = Store.open(db_file)
    try:
        assert applied(db_file)[5][1] == "m006_message_tool_calls"
        columns = store.db["messages"].columns_dict
        assert columns["tool_calls"] is str and columns["tool_results"] is str
        [message] = store.list_messages("s")
        assert (message.content, message.tool_calls, message.tool_results) == (
            "a reply", None, None)
        message.tool_calls = [{"id": "c1", "type": "function",
                               "function": {"name": "add", "arguments": '{"a": 1}'}}]
        message.tool_results = {"c1": {"status": "done", "text": "1"}}
        store.save_message(message)
        [back] = store.list_messages("s")
        assert (back.tool_calls, back.tool_results) == (message.tool_calls,
                                                        message.tool_results)
    finally:
        store.close()


def test_a_database_from_before_speculation_gains_the_draft_columns(tmp_path: Path) -> None:
    """The real file of the version before #29 (schema m004): m007 adds request_stats'
    drafted/accepted tokens and decode steps; its old row reads back with 0 of each, every
    old column unchanged, and a row written now keeps its figures."""
    db_file = tmp_path / "history.db"
    db_file.write_bytes(V4_DB.read_bytes())
    columns = "id, request_id, session_id, message_id, prompt_tokens, generated_tokens, " \
              "ttft_s, tokens_per_s, finish_reason, finished_at, cached_tokens"
    before = sqlite3.connect(db_file).execute(f"SELECT {columns} FROM request_stats").fetchall()
    assert before

    store = Store.open(db_file)
    try:
        assert "m007_request_stats_drafts" in [name for _, name in applied(db_file)]
        [old] = store.list_request_stats()
        assert (old.request_id, old.drafted_tokens, old.accepted_tokens,
                old.decode_steps) == ("req-1", 0, 0, 0)
        store.record_request_stats(RequestStatsRecord(
            request_id="req-2", generated_tokens=65, drafted_tokens=80, accepted_tokens=56,
            decode_steps=20, finished_at="2099-01-01"))
        new = store.list_request_stats()[-1]
        assert (new.request_id, new.drafted_tokens, new.accepted_tokens,
                new.decode_steps) == ("req-2", 80, 56, 20)
        after = sqlite3.connect(db_file).execute(
            f"SELECT {columns} FROM request_stats WHERE request_id = 'req-1'").fetchall()
        assert after == before
    finally:
        store.close()
