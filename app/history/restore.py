"""What the history brings back at start: the writes an earlier quit set aside, written
back before anything else (`replay_set_aside`), and the chats that were open, as
Conversations in tab order (`open_chats`, `load`). Qt-free."""

from __future__ import annotations

import logging
from pathlib import Path

from app.bridge import EngineBridge
from app.conversation import Conversation
from app.paths import DB_FILE_NAME, data_dir
from app.storage import LoadedSession, SafeStore, StorageError
from app.storage.replay import replay
from app.storage.set_aside import SUFFIX as SET_ASIDE_SUFFIX

from . import convert
from .reader import HistoryReader
from .status import StartReplay

log = logging.getLogger(__name__)


def fallback_set_aside_path() -> Path:
    """The data directory's set-aside file (for a database whose own folder is not
    writable): its lines name their database."""
    return data_dir() / (DB_FILE_NAME + SET_ASIDE_SUFFIX)


def replay_set_aside(store: SafeStore) -> StartReplay:
    """Write back what an earlier quit set aside (disk full, database locked): the file
    next to the database, then the data directory's fallback (its lines for this database
    only). A file stays where it is while the history cannot be written."""
    own = store.set_aside_path
    db = store.store
    reports, kept = [], []
    for path in dict.fromkeys(p for p in (own, fallback_set_aside_path()) if p is not None):
        if not path.is_file():
            continue
        if db is None or db.read_only:
            kept.append(path)
            continue
        reports.append(replay(db, path, only_db=None if path == own else db.path))
    return StartReplay(tuple(reports), tuple(kept))


def load(reader: HistoryReader, session_id: str) -> LoadedSession:
    """A saved session, to show in a tab. Raises StorageError or KeyError."""
    return reader.load_session(session_id)


def open_chats(reader: HistoryReader, bridge: EngineBridge
               ) -> list[tuple[LoadedSession, Conversation]]:
    """The tabs that were open, in order, with their chats (empty if unreadable)."""
    try:
        sessions = reader.list_sessions(open_only=True)
    except StorageError as exc:
        log.warning("could not restore the open chats: %s", exc)
        return []
    out = []
    for s in sessions:  # one chat that cannot be read costs only that tab
        try:
            loaded = load(reader, s.id)
            out.append((loaded, convert.conversation(loaded, bridge)))
        except (StorageError, KeyError, TypeError, ValueError) as exc:
            log.warning("could not restore chat %s (%s): %s", s.id, s.title, exc)
    return out
