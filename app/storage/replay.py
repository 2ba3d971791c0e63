"""Writes set aside at a quit (app/storage/set_aside.py) written back into the history.

Idempotent, and never older over newer: a session or message is written only when the
history has no row with its id, or its row is older than the set-aside copy (`updated_at`);
a change to a row (rename, open, close, reorder, checkpoint, delete) only when the row was
not changed after the change was set aside; request stats, snapshots and simulation results
only when their id is new. Replaying the same file twice adds nothing the second time.

Everything goes in one transaction: if the database cannot take it now (locked, full),
nothing is written and the file stays for the next start. A line that can never be
replayed (not JSON, an unknown kind of change, a value the database refuses) is skipped
and named; the other lines still are. After a replay the file is renamed
`<name>.replayed-<time>` (or `.not-replayed-<time>` when some lines could not be), so it is
not read again; nothing is deleted.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.storage.errors import StorageError
from app.storage.records import (
    Message,
    Record,
    RequestStatsRecord,
    Session,
    SimResult,
    SimRun,
    StatsSnapshot,
    utc_now,
)
from app.storage.store import Store
from app.storage.stored_responses import TABLE as API_RESPONSES

log = logging.getLogger(__name__)

_MISSING = object()  # no row with that id before this replay
_OLDEST = datetime.min.replace(tzinfo=UTC)


@dataclass
class ReplayReport:
    """What a replay did; `summary()` is what to tell the user ("" if nothing)."""

    path: Path
    moved_to: Path | None = None  # where the file went (None: it stays where it was)
    messages: set[str] = field(default_factory=set)  # ids of messages restored
    chats: set[str] = field(default_factory=set)  # ids of the sessions those are in
    changes: int = 0  # changes applied, of any kind
    failed: list[str] = field(default_factory=list)  # "line N: why", never replayable
    error: StorageError | None = None  # the database refused all for now: kept for later
    read_error: str | None = None  # the file could not be read: left as it is
    move_error: str | None = None

    def summary(self) -> str:
        if self.read_error is not None:
            return (f"Changes set aside when BatchChat last quit are in {self.path}, which "
                    f"could not be read ({self.read_error}); it is left as it is.")
        if self.error is not None:
            return (f"Changes set aside when BatchChat last quit, in {self.path}, could not "
                    f"be written back to the history yet ({self.error}); they are kept and "
                    "will be tried again at the next start.")
        parts = []
        n = len(self.messages)
        if n:
            chats = len(self.chats)
            parts.append(f"{n} message{_s(n)} (in {chats} chat{_s(chats)}) that could not be "
                         f"saved before BatchChat last quit {'were' if n != 1 else 'was'} "
                         "restored to the history.")
        elif self.changes:
            parts.append(f"{self.changes} change{_s(self.changes)} to the history that could "
                         "not be saved before BatchChat last quit "
                         f"{'were' if self.changes != 1 else 'was'} restored.")
        if self.failed:
            k = len(self.failed)
            shown = "; ".join(self.failed[:3]) + ("; …" if k > 3 else "")
            parts.append(f"{k} set-aside change{_s(k)} could not be restored ({shown}).")
        if not parts:
            return ""
        if self.moved_to is not None:
            parts.append(f"The set-aside file {self.path} is kept as {self.moved_to}.")
        else:
            parts.append(f"The set-aside file {self.path} could not be renamed "
                         f"({self.move_error}); it will be read again at the next start "
                         "(nothing is added twice).")
        return " ".join(parts)


def replay(store: Store, path: Path, *, only_db: Path | None = None) -> ReplayReport:
    """Write the set-aside file at `path` back into `store`, then rename it (see above).

    `only_db` (the data directory's fallback file, which any database may have used):
    replay only the lines that name that database; the others are put back in a new file
    at `path`, for theirs, and a file with none for it is left as it is."""
    report = ReplayReport(path)
    try:
        raw = path.read_bytes().decode("ascii", errors="replace").splitlines()
    except OSError as exc:
        report.read_error = exc.strerror or str(exc)
        return report
    entries, others = [], []
    for number, line in enumerate(raw, 1):
        if not line.strip():
            continue
        try:
            entry = _entry(line)
        except ValueError as exc:
            if only_db is not None:  # not known to be this database's: left for its own
                others.append(line)
            else:
                report.failed.append(f"line {number}: {exc}")
            continue
        if only_db is not None and not _same_file(entry.get("db"), only_db):
            others.append(line)
            continue
        entries.append((number, entry))
    if only_db is not None and not entries:
        return report  # nothing here for this database: the file is left as it is
    try:
        with store.atomic():
            _Replayer(store, report).run(entries)
    except StorageError as err:  # locked, full, damaged: nothing was written
        report.error = err
        report.failed.clear()
        report.messages.clear()
        report.chats.clear()
        report.changes = 0
        return report
    _move_aside(report, others)
    return report


class _Replayer:
    def __init__(self, store: Store, report: ReplayReport) -> None:
        self.store = store
        self.report = report
        self._before: dict[tuple[str, str, str], Any] = {}  # rows as they were

    def run(self, entries: list[tuple[int, dict[str, Any]]]) -> None:
        for number, entry in entries:
            apply = self._kinds().get(entry["write"])
            if apply is None:
                self.report.failed.append(
                    f"line {number}: unknown kind of change {entry['write']!r}")
                continue
            try:
                when = _time(entry.get("time"))
                with self.store.atomic():  # a savepoint: a refused line undoes only itself
                    changed = apply(when, *entry["args"])
            except StorageError as err:
                if err.is_transient:
                    raise
                self.report.failed.append(f"line {number}: {err}")
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                self.report.failed.append(f"line {number}: {entry['write']}: {exc}")
            else:
                self.report.changes += bool(changed)

    def _kinds(self) -> dict[str, Callable[..., bool]]:
        return {
            "save_session": self._save_session, "save_message": self._save_message,
            "checkpoint_message": self._checkpoint, "rename_session": self._rename,
            "set_pinned": self._pin,
            "open_session": self._open, "close_session": self._close,
            "reorder_sessions": self._reorder, "delete_session": self._delete_session,
            "delete_message": self._delete_message, "save_attachments": self._attachments,
            "record_request_stats": self._request_stats,
            "add_stats_snapshot": self._snapshot, "save_sim_run": self._sim_run,
            "add_sim_results": self._sim_results, "delete_sim_run": self._delete_sim_run,
            "put_api_response": self._api_response,
            "delete_api_response": self._delete_api_response,
            "save_draft_files": self._draft_files,
        }

    # -- what the row was before this replay ----------------------------------------------
    def _was(self, table: str, row_id: str, column: str = "updated_at") -> Any:
        key = (table, row_id, column)
        if key not in self._before:
            row = self.store.db.execute(f'SELECT "{column}" FROM "{table}" WHERE id = ?',
                                        [row_id]).fetchone()
            self._before[key] = _MISSING if row is None else row[0]
        return self._before[key]

    def _newer(self, record: Session | Message) -> bool:
        """No row had this id, or its row was older than the record."""
        was = self._was(record.TABLE, record.id)
        return was is _MISSING or _time(record.updated_at) > _time(was)

    def _not_changed_since(self, table: str, row_id: str, when: datetime) -> bool:
        """The row was not written after `when` (before this replay)."""
        was = self._was(table, row_id)
        return was is _MISSING or _time(was) <= when

    def _exists(self, table: str, row_id: str | None) -> bool:
        return row_id is not None and self.store.db.execute(
            f'SELECT 1 FROM "{table}" WHERE id = ?', [row_id]).fetchone() is not None

    def _is_new(self, record: Record) -> bool:
        return self._was(record.TABLE, record.id, "id") is _MISSING \
            and not self._exists(record.TABLE, record.id)

    # -- sessions and messages ----------------------------------------------------------
    def _save_session(self, _when: datetime, data: dict[str, Any]) -> bool:
        session = Session.from_dict(data)
        if not self._newer(session):
            return False
        row = session.to_row()  # its own updated_at, kept
        del row["pinned"]  # as save_session: only set_pinned changes a pin
        self.store.upsert(Session.TABLE, row)
        return True

    def _save_message(self, _when: datetime, data: dict[str, Any]) -> bool:
        message = Message.from_dict(data)
        if not self._newer(message) or not self._exists(Session.TABLE, message.session_id):
            return False  # newer in the history, or its chat was deleted since
        if "parent_id" not in data:  # set aside by a version before trees
            message.parent_id = self._old_parent(message)
        self.store.upsert(Message.TABLE, message.to_row())
        self._restored(message.id, message.session_id)
        return True

    def _old_parent(self, message: Message) -> str | None:
        """A message set aside before chats were trees: the parent its row has (migration
        m005 linked it), else the one before it by seq (as that migration does)."""
        db = self.store.db
        row = db.execute("SELECT parent_id FROM messages WHERE id = ?",
                         [message.id]).fetchone()
        if row is None:
            row = db.execute("SELECT id FROM messages WHERE session_id = ? AND seq < ? "
                             "ORDER BY seq DESC LIMIT 1",
                             [message.session_id, message.seq]).fetchone()
        return row[0] if row is not None else None

    def _checkpoint(self, when: datetime, message_id: str, content: str,
                    reasoning: str | None = None) -> bool:
        if not self._not_changed_since(Message.TABLE, message_id, when):
            return False
        cursor = self.store.db.execute(
            "UPDATE messages SET content = ?, reasoning = COALESCE(?, reasoning), "
            "token_ids = NULL, updated_at = ? WHERE id = ? AND is_complete = 0 "
            "AND (content IS NOT ? OR reasoning IS NOT COALESCE(?, reasoning))",
            [content, reasoning, utc_now(), message_id, content, reasoning])
        if cursor.rowcount == 0:
            return False
        session_id = self.store.db.execute("SELECT session_id FROM messages WHERE id = ?",
                                           [message_id]).fetchone()[0]
        self._restored(message_id, session_id)
        return True

    def _restored(self, message_id: str, session_id: str) -> None:
        self.report.messages.add(message_id)
        self.report.chats.add(session_id)

    def _rename(self, when: datetime, session_id: str, title: str) -> bool:
        return self._session_change(when, session_id, self.store.rename_session, title)

    def _pin(self, when: datetime, session_id: str, pinned: bool) -> bool:
        return self._session_change(when, session_id, self.store.set_pinned, bool(pinned))

    def _open(self, when: datetime, session_id: str) -> bool:
        return self._session_change(when, session_id, self.store.open_session)

    def _close(self, when: datetime, session_id: str) -> bool:
        return self._session_change(when, session_id, self.store.close_session)

    def _delete_session(self, when: datetime, session_id: str) -> bool:
        return self._session_change(when, session_id, self.store.delete_session)

    def _session_change(self, when: datetime, session_id: str,
                        change: Callable[..., None], *args: Any) -> bool:
        if not self._exists(Session.TABLE, session_id) or \
                not self._not_changed_since(Session.TABLE, session_id, when):
            return False
        change(session_id, *args)
        return True

    def _reorder(self, when: datetime, session_ids: list[str]) -> bool:
        ids = [i for i in session_ids if self._exists(Session.TABLE, i)
               and self._not_changed_since(Session.TABLE, i, when)]
        if ids:
            self.store.reorder_sessions(ids)
        return bool(ids)

    def _delete_message(self, when: datetime, message_id: str) -> bool:
        if not self._exists(Message.TABLE, message_id) or \
                not self._not_changed_since(Message.TABLE, message_id, when):
            return False
        self.store.delete_message(message_id)
        return True

    def _attachments(self, _when: datetime, message_id: str,
                     files: list[dict[str, Any]]) -> bool:
        """A message's files (#51): written once, with the message; only where the
        message is there and has none yet."""
        if not self._exists(Message.TABLE, message_id) or self.store.message_attachments(
                [message_id]):
            return False
        self.store.save_attachments(message_id, files)
        return True

    def _draft_files(self, _when: datetime, session_id: str,
                     files: list[dict[str, Any]]) -> bool:
        """A draft's files (#52): the last write set aside is what the draft held."""
        self.store.save_draft_files(session_id, files)
        return True

    # -- records written once -----------------------------------------------------------
    def _request_stats(self, _when: datetime, data: dict[str, Any]) -> bool:
        record = RequestStatsRecord.from_dict(data)
        if not self._is_new(record):
            return False
        # What ON DELETE SET NULL would have done had the row been saved in time.
        for column, table in (("session_id", "sessions"), ("message_id", "messages"),
                              ("sim_run_id", "sim_runs")):
            if not self._exists(table, getattr(record, column)):
                setattr(record, column, None)
        self.store.upsert(record.TABLE, record.to_row())
        return True

    def _snapshot(self, _when: datetime, data: dict[str, Any]) -> bool:
        record = StatsSnapshot.from_dict(data)
        if not self._is_new(record):
            return False
        self.store.upsert(record.TABLE, record.to_row())
        return True

    def _sim_run(self, _when: datetime, data: dict[str, Any]) -> bool:
        run = SimRun.from_dict(data)
        ended = self._was(SimRun.TABLE, run.id, "ended_at")
        if ended is not _MISSING and (ended is not None or run.ended_at is None):
            return False  # the history has it, as far along
        self.store.upsert(SimRun.TABLE, run.to_row())
        return True

    def _sim_results(self, _when: datetime, items: list[dict[str, Any]]) -> bool:
        results = [SimResult.from_dict(d) for d in items]
        new = [r for r in results
               if self._is_new(r) and self._exists(SimRun.TABLE, r.sim_run_id)]
        for result in new:
            self.store.upsert(SimResult.TABLE, result.to_row())
        return bool(new)

    def _delete_sim_run(self, _when: datetime, run_id: str) -> bool:
        if not self._exists(SimRun.TABLE, run_id):
            return False
        self.store.delete_sim_run(run_id)
        return True

    # -- the API server's stored responses (#53) ----------------------------------------
    def _api_response(self, _when: datetime, response_id: str, items: list[dict[str, Any]],
                      response: dict[str, Any]) -> bool:
        if self._was(API_RESPONSES, response_id, "id") is not _MISSING:
            return False  # written once: the history has it already
        self.store.put_api_response(response_id, items, response)
        return True

    def _delete_api_response(self, _when: datetime, response_id: str) -> bool:
        if not self._exists(API_RESPONSES, response_id):
            return False
        self.store.delete_api_response(response_id)
        return True


def _entry(line: str) -> dict[str, Any]:
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(entry, dict) or not isinstance(entry.get("write"), str) \
            or not isinstance(entry.get("args"), list):
        raise ValueError("not a set-aside change (no write and args)")
    return entry


def _time(text: Any) -> datetime:
    """A stored UTC ISO time; one that is missing or unreadable counts as the oldest."""
    try:
        value = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return _OLDEST
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _same_file(named: Any, db: Path) -> bool:
    if not isinstance(named, str):
        return False  # written before set-aside lines named their database: not known
    try:
        return Path(named).resolve() == db.resolve()
    except OSError:
        return False


def _move_aside(report: ReplayReport, others: list[str]) -> None:
    path = report.path
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(
        f"{path.name}.{'not-replayed' if report.failed else 'replayed'}-{stamp}")
    try:
        os.replace(path, target)
    except OSError as exc:
        report.move_error = exc.strerror or str(exc)
        log.warning("could not rename the replayed set-aside file %s: %s", path, exc)
        return
    report.moved_to = target
    if others:  # another database's lines: back where that database will look
        try:
            with path.open("a", encoding="ascii") as f:
                f.write("".join(line + "\n" for line in others))
        except OSError as exc:
            log.warning("set-aside changes of another history file stay in %s (%s)",
                        target, exc)
    log.info("set-aside history changes replayed from %s (%d changes, %d not replayable); "
             "the file is now %s", path, report.changes, len(report.failed), target)


def _s(n: int) -> str:
    return "s" if n != 1 else ""
