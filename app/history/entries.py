"""The narrow ways into the history's one writer that the Workspace hands out.

The Workspace alone holds the HistoryWriter (app/workspace.py); every other part gets only
the entry it needs, each keeping the writer in a private slot: so no public attribute
anywhere hands the writer (or its store) out, and tests/app/test_one_store_writer.py
checks that by type. Qt-free."""

from __future__ import annotations

import os

from app.events import Event
from app.storage import StorageError
from app.storage.records import RequestStatsRecord, SimResult, SimRun, StatsSnapshot

from .import_json import ImportReport
from .status import HistoryStatus
from .writer import HistoryWriter


class HistoryRecords:
    """Records other parts hand in: the API server's request stats, the stats panel's
    snapshots, the simulator's runs and results (and the History dialog's run deletes)."""

    __slots__ = ("_writer",)

    def __init__(self, writer: HistoryWriter) -> None:
        self._writer = writer

    def record_request_stats(self, record: RequestStatsRecord) -> None:
        self._writer.record_request_stats(record)

    def add_stats_snapshot(self, snapshot: StatsSnapshot) -> None:
        self._writer.add_stats_snapshot(snapshot)

    def save_sim_run(self, run: SimRun) -> None:
        self._writer.save_sim_run(run)

    def add_sim_results(self, results: list[SimResult]) -> None:
        self._writer.add_sim_results(results)

    def delete_sim_run(self, run_id: str) -> None:
        self._writer.delete_sim_run(run_id)


class ChatEdits:
    """What the sidebar and the History dialog change in chats no tab shows: pin, rename,
    import. `chats_changed()` fires after each (and after a delete through the Workspace)."""

    __slots__ = ("_writer", "chats_changed")

    def __init__(self, writer: HistoryWriter) -> None:
        self._writer = writer
        self.chats_changed: Event = writer.chats_changed

    def set_pinned(self, session_id: str, pinned: bool) -> None:
        self._writer.set_pinned(session_id, pinned)

    def rename_session(self, session_id: str, title: str) -> None:
        self._writer.rename_session(session_id, title)

    def import_file(self, path: str | os.PathLike[str]) -> ImportReport:
        return self._writer.import_file(path)


class HistoryUpkeep:
    """The history file's state and care, for the window's history controller: what is
    unsaved, retrying, flushing, moving the file. `status_changed()` as the writer's."""

    __slots__ = ("_writer", "status_changed")

    def __init__(self, writer: HistoryWriter) -> None:
        self._writer = writer
        self.status_changed: Event = writer.status_changed

    @property
    def pending_count(self) -> int:
        return self._writer.pending_count

    @property
    def last_error(self) -> StorageError | None:
        return self._writer.last_error

    @property
    def set_aside_count(self) -> int:
        return self._writer.set_aside_count

    @property
    def in_memory_only(self) -> bool:
        return self._writer.in_memory_only

    def status(self) -> HistoryStatus:
        return self._writer.status()

    def retry(self) -> bool:
        return self._writer.retry()

    def flush(self) -> None:
        self._writer.flush()

    def move_to(self, path: str | os.PathLike[str]) -> bool:
        return self._writer.move_to(path)
