"""The narrow ways into the history's one writer that the Workspace hands out.

The Workspace alone holds the HistoryWriter (app/workspace.py); every other part gets only
the entry it needs, each keeping the writer in a private slot: so no public attribute
anywhere hands the writer (or its store) out, and tests/app/test_one_store_writer.py
checks that by type. Qt-free."""

from __future__ import annotations

import logging
import os
from typing import Any

from app.events import Event
from app.storage import StorageError
from app.storage.records import RequestStatsRecord, SimResult, SimRun, StatsSnapshot
from app.storage.stored_responses import Stored

from .import_json import ImportReport
from .status import HistoryStatus
from .writer import HistoryWriter

log = logging.getLogger(__name__)


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


class ApiResponses:
    """The app's API server's stored responses (`store`, `previous_response_id`, GET and
    DELETE /v1/responses/{id}; issue #53), kept in the history so they survive a restart.
    Called on the loop's thread (the store's connection is bound to it), one row each.

    A put or delete whose write is queued (the file locked, the disk full) is remembered
    here until the queue is empty, so the next request sees it already."""

    __slots__ = ("_unsaved", "_writer")

    def __init__(self, writer: HistoryWriter) -> None:
        self._writer = writer
        self._unsaved: dict[str, Stored | None] = {}  # id -> queued put (None: delete)

    def put(self, response_id: str, items: list[dict[str, Any]],
            response: dict[str, Any]) -> None:
        self._queued(response_id, (items, response),
                     self._writer.put_api_response(response_id, items, response))

    def get(self, response_id: str) -> Stored | None:
        """(its whole input items, the response); None: unknown, deleted or expired."""
        if self._unsaved and self._writer.pending_count == 0:
            self._unsaved.clear()  # every queued write reached the file (or was set aside)
        if response_id in self._unsaved:
            return self._unsaved[response_id]
        try:
            return self._writer.reader.get_api_response(response_id)
        except StorageError as err:  # the history cannot be read now: as if never stored
            log.warning("stored response %s could not be read: %s", response_id, err)
            return None

    def delete(self, response_id: str) -> bool:
        """False: there was none of that id."""
        if self.get(response_id) is None:
            return False
        self._queued(response_id, None, self._writer.delete_api_response(response_id))
        return True

    def _queued(self, response_id: str, value: Stored | None, written: bool) -> None:
        if written:
            self._unsaved.pop(response_id, None)
        else:
            self._unsaved[response_id] = value


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
