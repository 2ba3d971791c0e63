"""Qt-free history store: SQLite via sqlite-utils, WAL, versioned migrations.

Use from one thread only (the Qt main thread). Typical use::

    safe = SafeStore.open()            # never raises for a bad file; see safe.last_error
    for session in safe.reader.list_sessions(open_only=True): ...
    safe.save_message(Message(session_id=s.id, seq=3, role="user", content="hi"))
    # on a QTimer every few seconds:
    safe.retry_pending()
"""

from typing import TYPE_CHECKING, Any

from app.storage.errors import SchemaTooNewError, StorageError
from app.storage.records import (
    LoadedSession,
    LoadedSimRun,
    Message,
    RequestStatsRecord,
    SearchHit,
    Session,
    SessionSummary,
    SimResult,
    SimRun,
    StatsSnapshot,
    new_id,
    utc_now,
)

if TYPE_CHECKING:
    from app.storage.safe_store import SafeStore
    from app.storage.store import Store


def __getattr__(name: str) -> Any:
    # The stores import sqlite-utils, and it pandas (~1-4 s): loaded when first named, so a
    # process that only needs the records or stored_responses (`batchchat serve`, the
    # simulator) starts without them.
    if name == "SafeStore":
        from app.storage.safe_store import SafeStore
        return SafeStore
    if name == "Store":
        from app.storage.store import Store
        return Store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "LoadedSession", "LoadedSimRun", "Message", "RequestStatsRecord", "SafeStore",
    "SchemaTooNewError", "SearchHit", "Session", "SessionSummary", "SimResult", "SimRun",
    "StatsSnapshot", "StorageError", "Store", "new_id", "utc_now",
]
