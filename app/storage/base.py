"""What every part of the Store shares: the connection and error translation."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from app.storage.errors import translate


class StoreBase:
    """Holds the connection. All calls must come from the thread that opened it
    (the Qt main thread): sqlite3 refuses a connection used from another thread."""

    def __init__(self, db: Database, path: Path, *, read_only: bool = False,
                 notice: str | None = None) -> None:
        self.db = db
        self.path = path
        self.read_only = read_only
        # Something the user should be told once (a damaged file set aside, read-only mode).
        self.notice = notice

    @contextmanager
    def atomic(self) -> Iterator[Database]:
        """One transaction: every write inside commits together or not at all.

        On a read-only store SQLite itself refuses the write (kind "read_only")."""
        try:
            with self.db.atomic():
                yield self.db
        except (sqlite3.Error, UnicodeError, OverflowError) as exc:  # (data SQLite refused)
            raise translate(exc, self.path) from exc

    def upsert(self, table: str, row: dict[str, Any]) -> None:
        """Insert the row, or update the row with the same id, in place (same rowid).

        Not sqlite-utils' upsert(): it probes for ON CONFLICT support once, and a probe
        that meets a locked database caches "unsupported" and falls back to
        INSERT OR IGNORE + UPDATE, which silently drops rows with NOT NULL columns."""
        cols = [f'"{c}"' for c in row]
        updates = ", ".join(f"{c} = excluded.{c}" for c in cols if c != '"id"')
        with self.atomic() as db:
            db.execute(
                f'INSERT INTO "{table}" ({", ".join(cols)}) VALUES ({", ".join("?" * len(row))}) '
                f"ON CONFLICT(id) DO UPDATE SET {updates}",
                list(row.values()),
            )

    @contextmanager
    def reading(self) -> Iterator[Database]:
        try:
            yield self.db
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
