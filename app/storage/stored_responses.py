"""The Responses API's stored responses (issue #53): a response's input items and its
response object by id, so that `previous_response_id` continues a conversation, also after
the server restarts, and `GET` / `DELETE /v1/responses/{id}` find it.

Kept in the history database's `api_responses` table (migration m010) or, with no file, in
memory. This class is `batchchat serve`'s, on a connection of its own; the app's built-in
server writes the same table through the history's one writer (app/storage/api_responses.py
on the Store, app/history/entries.py `ApiResponses`), with the row functions below.

Retention: responses older than `retention_days` are deleted as new ones are put, and at
most `max_responses` are kept (the oldest go first), so a busy server's file does not grow
without end."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # sqlite-utils (and pandas, which it imports) load with the first response:
    from sqlite_utils import Database  # `batchchat serve` starts without them

RETENTION_DAYS = 30.0  # OpenAI keeps a stored response 30 days
MAX_RESPONSES = 10_000  # the cap beside the age (a response's input can be long)
TABLE = "api_responses"

Stored = tuple[list[dict[str, Any]], dict[str, Any]]  # (its whole input items, the response)


class StoredResponses:
    """Responses by id. Thread-safe (one connection, a lock): the server calls it from its
    event loop, briefly (one row)."""

    def __init__(self, path: Path | None = None, retention_days: float = RETENTION_DAYS,
                 max_responses: int = MAX_RESPONSES) -> None:
        self.retention_s = retention_days * 86400.0
        self.max_responses = max_responses
        self._lock = threading.Lock()
        self._memory: OrderedDict[str, tuple[float, str, str]] = OrderedDict()
        self.path = path
        self._db: Database | None = None  # opened on first use (a server that is never
        # asked for a response never touches the file)

    def put(self, response_id: str, items: list[dict[str, Any]],
            response: dict[str, Any]) -> None:
        now = time.time()
        with self._lock:
            db = self._open()
            if db is None:
                self._memory[response_id] = (now, json.dumps(items), json.dumps(response))
                self._trim_memory(now)
                return
            with db.conn:
                put_row(db, response_id, items, response, self.retention_s,
                        self.max_responses)

    def get(self, response_id: str) -> Stored | None:
        """(its whole input items, the response), or None: unknown, deleted or expired."""
        with self._lock:
            db = self._open()
            if db is not None:
                return get_row(db, response_id, self.retention_s)
            row = self._memory.get(response_id)
        return None if row is None else _stored(row, self.retention_s)

    def delete(self, response_id: str) -> bool:
        """False: there was none of that id."""
        with self._lock:
            db = self._open()
            if db is None:
                return self._memory.pop(response_id, None) is not None
            with db.conn:
                return delete_row(db, response_id)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.conn.close()
                self._db: Database | None = None

    def _open(self) -> Database | None:
        """The database (None: in memory), opened and migrated on first use; the lock is
        held."""
        if self._db is None and self.path is not None:
            from sqlite_utils import Database

            from app.storage.migrations import check_not_newer, migrate

            self.path.parent.mkdir(parents=True, exist_ok=True)
            # check_same_thread off (not db.connect's way): the server's loop and its
            # worker threads both use it; the lock keeps one at a time
            db = Database(sqlite3.connect(str(self.path), timeout=5.0,
                                          check_same_thread=False), execute_plugins=False)
            db.execute("PRAGMA busy_timeout = 5000")
            try:
                check_not_newer(db, self.path)
                migrate(db)
            except BaseException:
                db.conn.close()
                raise
            self._db = db
        return self._db

    def _trim_memory(self, now: float) -> None:
        while self._memory and (len(self._memory) > self.max_responses or
                                next(iter(self._memory.values()))[0]
                                < now - self.retention_s):
            self._memory.popitem(last=False)


# -- the table's rows, on any connection (this one's, or the app's history store's:
# app/storage/api_responses.py), inside the caller's transaction --------------------------
def put_row(db: Database, response_id: str, items: list[dict[str, Any]],
            response: dict[str, Any], retention_s: float = RETENTION_DAYS * 86400.0,
            max_responses: int = MAX_RESPONSES) -> None:
    """Put one response; those past the retention, and the oldest past the cap, go."""
    now = time.time()
    db.execute(f"INSERT OR REPLACE INTO {TABLE} (id, created_at, input, response) "
               "VALUES (?, ?, ?, ?)", [response_id, now, json.dumps(items),
                                       json.dumps(response)])
    db.execute(f"DELETE FROM {TABLE} WHERE created_at < ?", [now - retention_s])
    db.execute(f"DELETE FROM {TABLE} WHERE id NOT IN (SELECT id FROM {TABLE} "
               "ORDER BY created_at DESC LIMIT ?)", [max_responses])


def get_row(db: Database, response_id: str,
            retention_s: float = RETENTION_DAYS * 86400.0) -> Stored | None:
    row = db.execute(f"SELECT created_at, input, response FROM {TABLE} WHERE id = ?",
                     [response_id]).fetchone()
    return None if row is None else _stored(tuple(row), retention_s)


def delete_row(db: Database, response_id: str) -> bool:
    """False: there was none of that id."""
    return db.execute(f"DELETE FROM {TABLE} WHERE id = ?", [response_id]).rowcount > 0


def _stored(row: tuple[float, str, str], retention_s: float) -> Stored | None:
    if row[0] < time.time() - retention_s:
        return None  # past the retention (deleted at the next put)
    return json.loads(row[1]), json.loads(row[2])
