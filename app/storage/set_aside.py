"""Writes the database can never take, kept in a JSON-lines file next to it.

A write that fails for a reason that will not clear up (text that is not valid Unicode, a
value SQLite cannot hold, a checkpoint of a reply that was never saved) must not stay at
the head of the queue, where it would block every later write. It is appended here as one
JSON object per line (`ensure_ascii`, so even a lone surrogate is written, as "\\ud800")
and the queue goes on."""

from __future__ import annotations

import dataclasses
import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SUFFIX = ".set-aside.jsonl"


def set_aside_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + SUFFIX)


def keep(path: Path, method: str, args: tuple[Any, ...], reason: str) -> bool:
    """Append one write to the file; False (logged) if the file cannot be written."""
    entry = {"time": datetime.now(UTC).isoformat(timespec="seconds"), "write": method,
             "reason": reason, "args": [_plain(a) for a in args]}
    line = json.dumps(entry, ensure_ascii=True, default=repr)
    try:
        with path.open("a", encoding="ascii") as f:
            f.write(line + "\n")
    except OSError as exc:
        log.error("could not keep a set-aside history write in %s: %s", path, exc)
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
