"""The history store: open (create, migrate, recover) and the per-entity methods."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from sqlite_utils import Database

from app.paths import db_path
from app.storage import db as dbfile
from app.storage.add_new import AddNewMixin
from app.storage.api_responses import ApiResponsesMixin
from app.storage.attachments import AttachmentsMixin
from app.storage.chat_list import ChatListMixin
from app.storage.draft_files import DraftFilesMixin
from app.storage.errors import StorageError, translate
from app.storage.messages import MessagesMixin
from app.storage.migrations import check_not_newer, has_pending, migrate, schema_version
from app.storage.salvage import copy_readable_rows
from app.storage.search import SearchMixin
from app.storage.sessions import SessionsMixin
from app.storage.sim_runs import SimRunsMixin
from app.storage.stats import StatsMixin


class Store(SessionsMixin, MessagesMixin, StatsMixin, SimRunsMixin, SearchMixin,
            AddNewMixin, ChatListMixin, AttachmentsMixin, ApiResponsesMixin,
            DraftFilesMixin):
    """Every write is one transaction and touches only its own rows.

    Errors come out as StorageError (str() is a message for the user). Not
    thread-safe: use it only from the thread that opened it (the Qt main thread).
    Wrap it in SafeStore to keep failed writes in memory and retry them."""

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        read_only: bool = False,
        # Short: a write waiting on another process's lock blocks the Qt main
        # thread; SafeStore retries later instead.
        busy_timeout_s: float = 0.5,
    ) -> Store:
        """Open (creating if needed) and migrate the database at path, or the default one.

        A damaged file (PRAGMA quick_check) is moved to <name>.corrupt-<time> and a fresh
        one started with every row that can still be read (store.notice says what). A
        file that cannot be written is opened read-only (store.read_only, store.notice).
        Raises SchemaTooNewError for a file from a newer BatchChat, untouched, and
        StorageError when it cannot be opened at all."""
        target = db_path(path)
        if read_only:
            return cls._open_read_only(target, busy_timeout_s)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            return cls._open_checked(target, read_only=False, busy_timeout_s=busy_timeout_s)
        except StorageError as err:
            if err.kind != "read_only" or not target.exists():
                raise
            # Still show the history: reading works where writing does not.
            store = cls._open_read_only(target, busy_timeout_s)
            # Not err.message: its "will be retried" is for a write that failed mid-session.
            store.notice = " ".join(filter(None, [
                f"The history file {target} cannot be written (read-only). Past chats are "
                "shown; new chats and changes are kept in memory only: use \"Save to "
                "another file\u2026\" above the tabs to keep them.",
                store.notice]))
            return store
        except OSError as exc:
            raise translate(exc, target) from exc

    @classmethod
    def _open_read_only(cls, path: Path, busy_timeout_s: float) -> Store:
        try:
            return cls._open_checked(path, read_only=True, busy_timeout_s=busy_timeout_s)
        except StorageError as err:
            if err.kind != "read_only":
                raise
            # A WAL file in a directory where SQLite cannot create its -shm file: read it
            # as immutable (it is: nothing here can write it). That reads nothing of a
            # -wal file, so say so if one holds changes (they stay on disk, untouched).
            store = cls._open_checked(path, read_only=True, busy_timeout_s=busy_timeout_s,
                                      immutable=True)
            wal = path.with_name(path.name + "-wal")
            with contextlib.suppress(OSError):
                if wal.stat().st_size > 0:
                    store.notice = (f"Changes kept in {wal} could not be read, so the latest "
                                    "ones may be missing from the history shown (the file is "
                                    "left as it is).")
            return store

    @classmethod
    def _open_checked(cls, path: Path, *, read_only: bool, busy_timeout_s: float,
                      immutable: bool = False) -> Store:
        db = cls._connect(path, read_only, busy_timeout_s, immutable)
        try:
            dbfile.probe(db)
            # Read-only: nothing could be set aside or repaired; show what can be read.
            damage = [] if read_only else dbfile.quick_check(db)
        except sqlite3.DatabaseError as exc:
            db.close()
            err = translate(exc, path)
            if err.kind != "corrupt" or read_only:
                raise err from exc
            damage = [str(exc)]
        moved = None
        if damage:
            db.close()
            moved = cls._set_aside(path)
            db = cls._connect(path, read_only, busy_timeout_s, immutable)
        try:
            check_not_newer(db, path)  # before anything below can write
            if read_only:
                if has_pending(db):
                    raise StorageError(
                        f"The history database at {path} is read-only and from an older "
                        "BatchChat, so it cannot be updated.", kind="read_only", path=path)
            else:
                dbfile.use_wal(db)
                migrate(db)
            notice = None if moved is None else cls._salvage(path, moved, damage, db)
        except BaseException as exc:
            db.close()
            if isinstance(exc, sqlite3.Error):
                raise translate(exc, path) from exc
            raise
        return cls(db, path, read_only=read_only, notice=notice)

    @staticmethod
    def _salvage(path: Path, moved: Path, damage: list[str], db: Database) -> str:
        """Carry what the damaged file still holds into the new one; what to tell the user."""
        report = copy_readable_rows(moved, db)
        return (f"The history database at {path} was damaged ({damage[0]}). It was moved to "
                f"{moved} (kept, never deleted) and a new one was started with everything "
                f"that could still be read. {report.summary()}")

    @staticmethod
    def _connect(path: Path, read_only: bool, busy_timeout_s: float,
                 immutable: bool = False) -> Database:
        try:
            return dbfile.connect(path, read_only=read_only, busy_timeout_s=busy_timeout_s,
                                  immutable=immutable)
        except sqlite3.Error as exc:
            raise translate(exc, path) from exc

    @staticmethod
    def _set_aside(path: Path) -> Path:
        try:
            return dbfile.set_aside(path)
        except OSError as exc:
            raise translate(exc, path) from exc

    @property
    def schema_version(self) -> int:
        return schema_version()

    def merge_wal(self) -> bool:
        """Merge the write-ahead log into the file and free its space (db.merge_wal)."""
        return False if self.read_only else dbfile.merge_wal(self.db)

    def close(self) -> None:
        """Close the connection (SQLite checkpoints the WAL into the main file)."""
        with contextlib.suppress(sqlite3.Error):
            self.db.close()
