"""Opening the SQLite file: connection settings, health probe, setting a bad file aside."""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from sqlite_utils import Database

SIDE_FILES = ("-wal", "-shm", "-journal")
WAL_PAGES = 64  # 256 KiB of 4 KiB pages: a streaming reply's checkpoints fill it in seconds
WAL_LIMIT_BYTES = 256 << 10


def connect(path: Path, *, read_only: bool = False, busy_timeout_s: float = 0.5,
            immutable: bool = False) -> Database:
    """A Database bound to the calling thread (sqlite3's check_same_thread stays on).

    `immutable` (read-only only): no locks and no -shm file, for a WAL file in a directory
    where SQLite cannot create one; it sees nothing of a -wal file."""
    if read_only:
        uri = f"file:{quote(str(path.resolve()))}?mode=ro" + ("&immutable=1" if immutable else "")
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s)
    else:
        conn = sqlite3.connect(str(path), timeout=busy_timeout_s)
    try:
        db = Database(conn, execute_plugins=False)
        db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        db.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return db


def probe(db: Database) -> None:
    """Read the header and schema; raises sqlite3.DatabaseError for a file that is not a db
    (quick_check below looks at every page)."""
    db.execute("SELECT count(*) FROM sqlite_master").fetchone()


def quick_check(db: Database) -> list[str]:
    """What `PRAGMA quick_check` finds wrong (empty when the file is sound). It reads every
    page, so a damaged table is found at start, not when a chat fails to load; raises
    sqlite3.DatabaseError where the damage stops the check itself."""
    rows = [str(r[0]) for r in db.execute("PRAGMA quick_check(20)").fetchall()]
    return [] if rows == ["ok"] else rows


def use_wal(db: Database) -> None:
    """WAL lets a reader see committed rows while we write; FULL sync because a finished
    message must survive a power cut too, and our writes are few."""
    with db.ensure_autocommit_on():
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise sqlite3.OperationalError(f"could not switch to WAL (journal_mode={mode})")
    db.execute("PRAGMA synchronous = FULL")
    # The log is merged into the file every WAL_PAGES pages and then cut back to
    # WAL_LIMIT_BYTES: by default (1000 pages, never cut) it grew to fill a small free
    # space while history.db stayed at 4 KB (issue #46); SafeStore merges it on a full disk.
    db.execute(f"PRAGMA wal_autocheckpoint = {WAL_PAGES}")
    db.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")


def merge_wal(db: Database) -> bool:
    """Merge the write-ahead log into the database file and cut it to 0 bytes; True when all
    of it was merged (False: a reader held it, or the file could not grow)."""
    try:
        busy, _frames, _merged = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error:
        return False
    return busy == 0


def set_aside(path: Path) -> Path:
    """Rename a damaged file (and its WAL/SHM) to <name>.corrupt-<timestamp>; never delete."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    os.replace(path, target)
    for suffix in SIDE_FILES:
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, target.with_name(target.name + suffix))
    return target
