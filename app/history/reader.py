"""The history as its readers see it: `HistoryReader` has every read the app makes and no
write. The store itself stays inside the writer (app/history/writer.py); the sidebar, the
history view, the simulator's export and the tests read through this. Qt-free."""

from __future__ import annotations

from typing import Any

from app.storage import (
    LoadedSession,
    LoadedSimRun,
    Message,
    RequestStatsRecord,
    SafeStore,
    SearchHit,
    Session,
    SessionSummary,
    SimRun,
    StatsSnapshot,
    Store,
)
from app.storage.chat_list import ChatSummary
from app.storage.stored_responses import Stored


class HistoryReader:
    """Reads see only what is saved (queued writes are not in the database yet); each
    raises StorageError when the history cannot be read."""

    __slots__ = ("_safe",)

    def __init__(self, store: SafeStore) -> None:
        self._safe = store  # read through `reader` each time: move_to may swap the file

    @property
    def pending_count(self) -> int:
        """Writes still queued (the database lacks them for now)."""
        return self._safe.pending_count

    def list_chats(self) -> list[ChatSummary]:
        return self._safe.reader.list_chats()

    def search(self, text: str, limit: int = 50,
               marks: tuple[str, str] = ("[", "]")) -> list[SearchHit]:
        return self._safe.reader.search(text, limit=limit, marks=marks)

    def get_session(self, session_id: str) -> Session | None:
        return self._safe.reader.get_session(session_id)

    def list_sessions(self, open_only: bool = False) -> list[Session]:
        return self._safe.reader.list_sessions(open_only=open_only)

    def list_history(self, limit: int | None = None) -> list[SessionSummary]:
        return self._safe.reader.list_history(limit)

    def load_session(self, session_id: str) -> LoadedSession:
        return self._safe.reader.load_session(session_id)

    def list_messages(self, session_id: str) -> list[Message]:
        return self._safe.reader.list_messages(session_id)

    def list_sim_runs(self) -> list[SimRun]:
        return self._safe.reader.list_sim_runs()

    def load_sim_run(self, run_id: str) -> LoadedSimRun:
        return self._safe.reader.load_sim_run(run_id)

    def list_request_stats(self, session_id: str | None = None,
                           sim_run_id: str | None = None) -> list[RequestStatsRecord]:
        return self._safe.reader.list_request_stats(session_id=session_id,
                                                    sim_run_id=sim_run_id)

    def list_stats_snapshots(self, since: str | None = None) -> list[StatsSnapshot]:
        return self._safe.reader.list_stats_snapshots(since)

    def get_api_response(self, response_id: str) -> Stored | None:
        """A response the app's API server stored (#53): (its input items, the response)."""
        return self._safe.reader.get_api_response(response_id)

    def draft_files(self) -> dict[str, list[dict[str, Any]]]:
        """Unsent drafts' files and images by session id (#52), in their saved form."""
        return self._safe.reader.draft_files()

    def _whole(self) -> Store:
        """The store for app/history/export.py's whole-table reads (a full export), inside
        app/history only."""
        return self._safe.reader
