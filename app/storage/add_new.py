"""Adding records in bulk without touching rows that exist (the history import)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlite_utils import Database

from app.storage.attachments import write_files
from app.storage.base import StoreBase
from app.storage.records import Record


class NewRows:
    """Inside one transaction: which ids a table has, and inserting only new ones."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._ids: dict[str, set[str]] = {}  # table -> ids in it, read once per table

    def exists(self, record: Record) -> bool:
        return record.id in self._existing(record.TABLE)

    def has(self, table: str, record_id: str) -> bool:
        """Whether `table` holds a row with this id (one added in this transaction too)."""
        return record_id in self._existing(table)

    def add(self, records: Sequence[Record]) -> int:
        """Insert the records (all of one table) whose id is not there yet; how many were."""
        if not records:
            return 0
        table = records[0].TABLE
        existing = self._existing(table)
        new = [r for r in records if r.id not in existing]
        if new:
            self._db.table(table).insert_all([r.to_row() for r in new])
            existing.update(r.id for r in new)
        return len(new)

    def add_files(self, message_id: str, files: Sequence[dict[str, Any]]) -> None:
        """A message's attached files (app/storage/attachments.py), its texts shared."""
        write_files(self._db, message_id, files)

    def _existing(self, table: str) -> set[str]:
        if table not in self._ids:
            self._ids[table] = {row[0] for row in self._db.execute(f'SELECT id FROM "{table}"')}
        return self._ids[table]


class AddNewMixin(StoreBase):
    @contextmanager
    def adding_new(self) -> Iterator[NewRows]:
        """One transaction that adds rows and never overwrites one: everything inside
        commits together, or nothing does (StorageError)."""
        with self.atomic() as db:
            yield NewRows(db)
