"""What the history's state is, as facts for ui/history/words.py to word. Qt-free."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.storage import StorageError
from app.storage.replay import ReplayReport


@dataclass(frozen=True, slots=True)
class StartReplay:
    """What the start did with writes an earlier quit set aside: replayed (`reports`), or
    left in their files (`kept`) while the history cannot be written."""

    reports: tuple[ReplayReport, ...] = ()
    kept: tuple[Path, ...] = ()


@dataclass(frozen=True, slots=True)
class HistoryStatus:
    pending: int  # writes queued, retried on a timer
    last_error: StorageError | None
    in_memory_only: bool  # the file cannot be written now (read-only, or not open)
    read_only_path: Path | None  # the file, when it is open read-only
    set_aside: int  # writes that could never succeed, kept in `set_aside_path`
    latest_set_aside_reason: StorageError | None
    set_aside_path: Path | None
    store_notice: str | None  # what opening the file found (app/storage's words)
    start_replay: StartReplay
