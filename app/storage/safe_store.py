"""Write-behind wrapper: a write that fails is kept in memory, in order, and retried.

The app calls the write methods here (never Store's directly) and retry_pending()
on a timer. Nothing is dropped: a transient failure (locked, read-only, disk full,
damaged, I/O) stops the queue until a retry succeeds; a write that can never succeed
(invalid data: text that is not valid Unicode, a value SQLite cannot hold) is set aside
into `rejected` and the file `<db>.set-aside.jsonl` next to the database, logged, and the
queue goes on without it. A quit with no one to ask (SIGTERM) moves what is still queued
into that file too (`set_aside_pending`).
"""

from __future__ import annotations

import copy
import logging
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.storage import set_aside
from app.storage.errors import StorageError, translate
from app.storage.records import (
    Message,
    RequestStatsRecord,
    Session,
    SimResult,
    SimRun,
    StatsSnapshot,
)
from app.storage.salvage import copy_rows
from app.storage.store import Store

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PendingWrite:
    method: str
    args: tuple[Any, ...]


class SafeStore:
    def __init__(self, opener: Callable[[], Store]) -> None:
        self._opener = opener
        self.store: Store | None = None
        self.last_error: StorageError | None = None
        self.notice: str | None = None
        self.rejected: list[tuple[PendingWrite, StorageError]] = []
        self._set_aside_path: Path | None = None
        self._pending: deque[PendingWrite] = deque()
        self._reopen()

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> SafeStore:
        """Never raises StorageError: on failure the app runs from memory (see last_error)."""
        return cls(lambda: Store.open(path, **kwargs))

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    @property
    def reader(self) -> Store:
        """The Store for reads (list, load, search, export); raises the last error if none.

        Reads see only what is saved: queued writes are not in the database yet."""
        if self.store is None:
            raise self.last_error or StorageError("The history database is not open.",
                                                  kind="io")
        return self.store

    # Writes: each returns True if saved now, False if kept in memory for retry.
    def save_session(self, session: Session) -> bool:
        return self._submit("save_session", copy.copy(session))

    def rename_session(self, session_id: str, title: str) -> bool:
        return self._submit("rename_session", session_id, title)

    def open_session(self, session_id: str) -> bool:
        return self._submit("open_session", session_id)

    def close_session(self, session_id: str) -> bool:
        return self._submit("close_session", session_id)

    def set_pinned(self, session_id: str, pinned: bool) -> bool:
        return self._submit("set_pinned", session_id, pinned)

    def reorder_sessions(self, session_ids: list[str]) -> bool:
        return self._submit("reorder_sessions", list(session_ids))

    def delete_session(self, session_id: str) -> bool:
        return self._submit("delete_session", session_id)

    def save_message(self, message: Message) -> bool:
        return self._submit("save_message", copy.copy(message))

    def checkpoint_message(self, message_id: str, content: str,
                           reasoning: str | None = None) -> bool:
        if reasoning is None:  # the shape writes set aside before #49's thinking had
            return self._submit("checkpoint_message", message_id, content)
        return self._submit("checkpoint_message", message_id, content, reasoning)

    def delete_message(self, message_id: str) -> bool:
        return self._submit("delete_message", message_id)

    def save_attachments(self, message_id: str, files: list[dict[str, Any]]) -> bool:
        return self._submit("save_attachments", message_id, list(files))

    def save_draft_files(self, session_id: str, files: list[dict[str, Any]]) -> bool:
        return self._submit("save_draft_files", session_id, list(files))

    def put_api_response(self, response_id: str, items: list[dict[str, Any]],
                         response: dict[str, Any]) -> bool:
        return self._submit("put_api_response", response_id, copy.deepcopy(items),
                            copy.deepcopy(response))

    def delete_api_response(self, response_id: str) -> bool:
        return self._submit("delete_api_response", response_id)

    def record_request_stats(self, stats: RequestStatsRecord) -> bool:
        return self._submit("record_request_stats", copy.copy(stats))

    def add_stats_snapshot(self, snapshot: StatsSnapshot) -> bool:
        return self._submit("add_stats_snapshot", copy.copy(snapshot))

    def save_sim_run(self, run: SimRun) -> bool:
        return self._submit("save_sim_run", copy.copy(run))

    def add_sim_results(self, results: list[SimResult]) -> bool:
        return self._submit("add_sim_results", [copy.copy(r) for r in results])

    def delete_sim_run(self, run_id: str) -> bool:
        return self._submit("delete_sim_run", run_id)

    def retry_pending(self) -> bool:
        """Write what is queued, in order; True when nothing is left. Call on a timer."""
        if self._pending and self._needs_reopen():
            self._reopen()
        store = self.store
        rejected = merged = False
        if store is not None and self.last_error is not None \
                and self.last_error.kind == "disk_full":
            merged = store.merge_wal()  # freed space goes to the merge before new writes
        while self._pending and store is not None:
            write = self._pending[0]
            try:
                getattr(store, write.method)(*write.args)
            except StorageError as err:
                self.last_error = err
                if err.kind == "disk_full" and not merged:
                    # The log may hold most of the space (many versions of a streaming
                    # reply's pages): merged into the file and cut, it frees it.
                    merged = True
                    if store.merge_wal():
                        continue
                if err.is_transient:
                    return False
                self._reject(write, err)
                rejected = True
            except KeyError as err:  # checkpoint of a reply that was never saved
                self._reject(write, StorageError(f"No saved message {err} to checkpoint.",
                                                 kind="invalid", path=store.path))
                rejected = True
            except Exception as exc:  # any other failure belongs to this write alone
                self._reject(write, translate(exc, store.path))
                rejected = True
            self._pending.popleft()
        if not self._pending and store is not None and not rejected:
            self.last_error = None
        return not self._pending

    def move_to(self, path: str | os.PathLike[str]) -> bool:
        """Keep the history in another file from now on: a new database at `path` gets
        every row the current one can read, then the queued writes. True when nothing is
        left unsaved; raises StorageError (and changes nothing) if `path` cannot be used."""
        target = Path(path)
        new = Store.open(target)
        if new.read_only:
            new.close()
            raise StorageError(f"{target} is read-only; choose a file in a folder you can "
                               "write to.", kind="read_only", path=target)
        try:
            if self.store is not None and self.store.path.resolve() != target.resolve():
                copy_rows(self.store.db.conn, new.db)
        except BaseException:
            new.close()
            raise
        if self.store is not None:
            self.store.close()
        self.store, self.last_error, self.notice = new, None, None
        self._opener = lambda: Store.open(target)
        self._set_aside_path = set_aside.set_aside_path(target)
        return self.retry_pending()

    def close(self) -> bool:
        """Try once more to write what is queued, then close; False if writes remain."""
        done = self.retry_pending()
        if self.store is not None:
            self.store.close()
            self.store = None
        return done

    def set_aside_pending(self, reason: str, fallback: Path | None = None) -> Path | None:
        """Move every queued write, in order, into the set-aside file (next to the database,
        else `fallback`): for a quit with no one to ask what to do with them. The file they
        went to; None if nothing was queued or no file could be written (they stay queued,
        and it is logged)."""
        if not self._pending:
            return None
        writes = [(w.method, w.args) for w in self._pending]
        candidates = [p for p in (self._set_aside_path, fallback) if p is not None]
        for path in dict.fromkeys(candidates):
            if set_aside.keep_all(path, writes, reason, self._db_path):
                log.warning("%d unsaved history changes set aside in %s", len(writes), path)
                self._pending.clear()
                return path
        log.error("%d unsaved history changes could not be set aside either", len(writes))
        return None

    def _submit(self, method: str, *args: Any) -> bool:
        if method == "checkpoint_message":
            # A newer checkpoint of the same reply supersedes a queued one.
            self._pending = deque(
                w for w in self._pending
                if not (w.method == method and w.args[0] == args[0]))
        self._pending.append(PendingWrite(method, args))
        if len(self._pending) > 1:
            # Stalled on an earlier failure: leave it to the retry timer, so a locked or
            # read-only database costs one busy timeout (or reopen) per retry, not per write.
            return False
        return self.retry_pending()

    @property
    def set_aside_path(self) -> Path | None:
        """The file that keeps writes set aside (None before the database was opened)."""
        return self._set_aside_path

    @property
    def _db_path(self) -> Path | None:
        """The database the queued writes are for (named in the set-aside file)."""
        path = self._set_aside_path
        return None if path is None else path.with_name(
            path.name.removesuffix(set_aside.SUFFIX))

    def _reject(self, write: PendingWrite, err: StorageError) -> None:
        log.error("history write %s set aside: %s", write.method, err)
        self.last_error = err
        self.rejected.append((write, err))
        if self._set_aside_path is not None:
            set_aside.keep(self._set_aside_path, write.method, write.args, str(err),
                           self._db_path)

    def _needs_reopen(self) -> bool:
        # Not for "corrupt": reopening would start an empty file under queued writes
        # that refer to rows in the damaged one; a restart sets it aside instead.
        return self.store is None or self.store.read_only or (
            self.last_error is not None and self.last_error.kind == "read_only")

    def _reopen(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
        try:
            self.store = self._opener()
        except StorageError as err:
            self.last_error = err
            return
        self._set_aside_path = set_aside.set_aside_path(self.store.path)
        if self.store.notice:
            self.notice = self.store.notice

