"""Writes the database can never take, kept in a JSON-lines file next to it.

A write that fails for a reason that will not clear up (text that is not valid Unicode, a
value SQLite cannot hold, a checkpoint of a reply that was never saved) must not stay at
the head of the queue, where it would block every later write. It is appended here as one
JSON object per line (`ensure_ascii`, so even a lone surrogate is written, as "\\ud800")
and the queue goes on. A quit with writes still queued (disk full, database locked) puts
them here too; the next start writes them back (app/storage/replay.py)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SUFFIX = ".set-aside.jsonl"


def set_aside_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + SUFFIX)


def keep(path: Path, method: str, args: tuple[Any, ...], reason: str,
         db: Path | None = None) -> bool:
    """Append one write to the file; False (logged) if the file cannot be written."""
    return keep_all(path, [(method, args)], reason, db)


def keep_all(path: Path, writes: list[tuple[str, tuple[Any, ...]]], reason: str,
             db: Path | None = None) -> bool:
    """Append writes (method, args), in order, with one reason and the database they were
    for (`db`: so the data directory's fallback file is replayed into the right one);
    False (logged) if the file cannot be written. The time is when they were set aside:
    a replay never puts one over a row written after it (app/storage/replay.py)."""
    now = datetime.now(UTC).isoformat(timespec="microseconds")
    where = {} if db is None else {"db": os.path.abspath(db)}  # the same from any cwd
    lines = "".join(
        json.dumps({"time": now, "write": method, "reason": reason, **where,
                    "args": [_plain(a) for a in args]}, ensure_ascii=True, default=repr) + "\n"
        for method, args in writes)
    try:
        with path.open("a", encoding="ascii") as f:
            f.write(lines)
    except OSError as exc:
        log.error("could not keep set-aside history writes in %s: %s", path, exc)
        return False
    return True


def read(path: Path) -> list[dict[str, Any]]:
    """The entries kept so far (tests and recovery tools)."""
    return [json.loads(line) for line in path.read_text(encoding="ascii").splitlines()]


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
