"""The schema, as sqlite-utils migrations recorded in the database itself.

Add a migration by appending a new function; never edit or rename an applied one.
The applied names are the schema version: a name this code does not know means the
file was written by a newer BatchChat, and it is refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlite_utils import Database
from sqlite_utils.db import ForeignKey
from sqlite_utils.migrations import Migrations

from app.storage.errors import SchemaTooNewError

MIGRATION_SET = "batchchat"
migrations = Migrations(MIGRATION_SET)
_NAMES: list[str] = []


def _migration(fn: Callable[[Database], None]) -> Callable[[Database], None]:
    _NAMES.append(fn.__name__)
    return migrations()(fn)


def schema_version() -> int:
    """The schema version this code writes: the number of its migrations."""
    return len(_NAMES)


def _cascade(table: str, column: str, other: str, action: str = "CASCADE") -> ForeignKey:
    return ForeignKey(table, column, other, "id", on_delete=action)


@_migration
def m001_tables(db: Database) -> None:
    strict = db.supports_strict
    db["sessions"].create(
        {
            "id": str, "title": str, "system_prompt": str, "params": str, "preset": str,
            "position": int, "is_open": int, "created_at": str, "updated_at": str,
        },
        pk="id", not_null={"title", "system_prompt", "params", "position", "is_open",
                           "created_at", "updated_at"},
        strict=strict,
    )
    db["messages"].create(
        {
            "id": str, "session_id": str, "seq": int, "role": str, "content": str,
            "is_complete": int, "params": str, "stats": str,
            "created_at": str, "updated_at": str,
        },
        pk="id", not_null={"session_id", "seq", "role", "content", "is_complete",
                           "created_at", "updated_at"},
        foreign_keys=[_cascade("messages", "session_id", "sessions")],
        strict=strict,
    )
    db["messages"].create_index(["session_id", "seq"])
    db["sim_runs"].create(
        {"id": str, "title": str, "config": str, "summary": str,
         "started_at": str, "ended_at": str},
        pk="id", not_null={"title", "config", "started_at"}, strict=strict,
    )
    db["sim_results"].create(
        {
            "id": str, "sim_run_id": str, "seq": int, "prompt": str, "reply": str,
            "prompt_tokens": int, "generated_tokens": int, "finish_reason": str,
            "queue_s": float, "ttft_s": float, "tokens_per_s": float,
        },
        pk="id", not_null={"sim_run_id", "seq", "prompt", "reply"},
        foreign_keys=[_cascade("sim_results", "sim_run_id", "sim_runs")],
        strict=strict,
    )
    db["sim_results"].create_index(["sim_run_id", "seq"])
    # Engine numbers outlive the chat they came from, so deleting one keeps them.
    db["request_stats"].create(
        {
            "id": str, "request_id": str, "session_id": str, "message_id": str,
            "sim_run_id": str, "prompt_tokens": int, "generated_tokens": int,
            "ttft_s": float, "tokens_per_s": float, "queue_s": float, "decode_s": float,
            "finish_reason": str, "finished_at": str,
        },
        pk="id", not_null={"request_id", "finished_at"},
        foreign_keys=[
            _cascade("request_stats", "session_id", "sessions", "SET NULL"),
            _cascade("request_stats", "message_id", "messages", "SET NULL"),
            _cascade("request_stats", "sim_run_id", "sim_runs", "SET NULL"),
        ],
        strict=strict,
    )
    db["request_stats"].create_index(["finished_at"])
    db["stats_snapshots"].create(
        {"id": str, "taken_at": str, "data": str},
        pk="id", not_null={"taken_at", "data"}, strict=strict,
    )
    db["stats_snapshots"].create_index(["taken_at"])


@_migration
def m002_search(db: Database) -> None:
    # External-content FTS keyed on rowid: never VACUUM without rebuild_fts() after.
    for table, columns in SEARCH_COLUMNS.items():
        db[table].enable_fts(columns, create_triggers=True, tokenize="porter")


SEARCH_COLUMNS: dict[str, list[str]] = {
    "sessions": ["title", "system_prompt"],
    "messages": ["content"],
    "sim_runs": ["title"],
    "sim_results": ["prompt", "reply"],
}


@_migration
def m003_message_token_ids(db: Database) -> None:
    # A reply's generated token ids (JSON list), so a restored chat hands the engine the
    # same ids and its saved KV still matches; NULL for user messages and older replies.
    db["messages"].add_column("token_ids", str)


@_migration
def m004_request_stats_cached_tokens(db: Database) -> None:
    # Prompt tokens the engine reused from its prefix cache; rows from before count 0.
    db["request_stats"].add_column("cached_tokens", int, not_null_default=0)


@_migration
def m005_message_tree(db: Database) -> None:
    # Issue #29: a chat is a tree. Each message names its parent (NULL: a first message);
    # seq becomes the order messages were made in (siblings and versions sort by it). Every
    # chat written before is one path: each message's parent is the one before it by seq.
    db["messages"].add_column("parent_id", str)
    db.execute(
        "UPDATE messages SET parent_id = (SELECT p.id FROM messages p WHERE "
        "p.session_id = messages.session_id AND p.seq < messages.seq ORDER BY p.seq DESC "
        "LIMIT 1)"
    )
    db["messages"].create_index(["parent_id"])
    # The path a tab shows ends here (NULL: the newest message's path); pinned chats sort
    # first in the sidebar.
    db["sessions"].add_column("shown_leaf_id", str)
    db["sessions"].add_column("pinned", int, not_null_default=0)


@_migration
def m006_message_tool_calls(db: Database) -> None:
    # Issue #30: a reply that called tools keeps its calls (JSON list, OpenAI's shape) and
    # each call's outcome by call id (JSON object: status and text), so a reopened chat
    # shows them and its next prompt still holds them; NULL for every other message.
    db["messages"].add_column("tool_calls", str)
    db["messages"].add_column("tool_results", str)


@_migration
def m007_request_stats_drafts(db: Database) -> None:
    # Issue #31: speculative decoding's draft tokens checked and accepted, and the decode
    # steps a request took (tokens a step = (generated - 1) / steps); rows from before: 0.
    for column in ("drafted_tokens", "accepted_tokens", "decode_steps"):
        db["request_stats"].add_column(column, int, not_null_default=0)


@_migration
def m008_message_reasoning(db: Database) -> None:
    # Issue #49: a reasoning model's reply keeps its thinking beside the answer (the
    # content), shown folded above it and saved apart from it; NULL for every other message
    db["messages"].add_column("reasoning", str)


@_migration
def m009_message_attachments(db: Database) -> None:
    # Issue #51: the files a message carried. Their text is content-addressed (sha256 of
    # the text read; zlib-compressed JSON of its parts) in attachment_texts, one row however
    # many messages attach it; message_attachments names each message's files in order.
    # A text over the cap is not kept (kept = 0: the message remembers its name and size).
    strict = db.supports_strict
    db["attachment_texts"].create(
        {"hash": str, "kind": str, "size": int, "data": bytes},
        pk="hash", not_null={"kind", "size", "data"}, strict=strict)
    db["message_attachments"].create(
        {"message_id": str, "position": int, "name": str, "kind": str, "size": int,
         "skipped": int, "hash": str, "kept": int},
        pk=("message_id", "position"),
        not_null={"name", "kind", "size", "skipped", "hash", "kept"},
        foreign_keys=[_cascade("message_attachments", "message_id", "messages")],
        strict=strict)
    db["message_attachments"].create_index(["hash"])


@_migration
def m010_stored_responses(db: Database) -> None:
    # Issue #53: the Responses API's stored responses (`store`, `previous_response_id`):
    # each response's id, its whole input items and its response object (JSON), when it
    # was made (retention: app/storage/stored_responses.py deletes the old ones)
    db["api_responses"].create(
        {"id": str, "created_at": float, "input": str, "response": str},
        pk="id", not_null={"created_at", "input", "response"},
        strict=db.supports_strict)
    db["api_responses"].create_index(["created_at"])


@_migration
def m011_draft_attachments(db: Database) -> None:
    # Issue #52: the files and images of a tab's unsent draft, kept across a restart: the
    # texts content-addressed in attachment_texts as a message's are, named by session id
    # (no foreign key: an empty chat's row goes at quit while its draft waits)
    db["draft_attachments"].create(
        {"session_id": str, "position": int, "name": str, "kind": str, "size": int,
         "skipped": int, "hash": str},
        pk=("session_id", "position"), not_null={"name", "kind", "size", "skipped", "hash"},
        strict=db.supports_strict)
    db["draft_attachments"].create_index(["hash"])


def check_not_newer(db: Database, path: Path) -> None:
    """Refuse a database that has migrations this code does not know (read-only check)."""
    unknown = [m.name for m in migrations.applied(db) if m.name not in _NAMES]
    if unknown:
        raise SchemaTooNewError(
            f"The history database at {path} was written by a newer version of BatchChat "
            f"(unknown schema changes: {', '.join(unknown)}). It was left untouched; "
            "update BatchChat, or set BATCHCHAT_DB to use another file.",
            kind="too_new",
            path=path,
        )


def has_pending(db: Database) -> bool:
    return bool(migrations.pending(db))


def migrate(db: Database) -> None:
    """Bring the schema to the latest version; each step is its own transaction."""
    migrations.apply(db)
