"""The history store's one writer: keeps it in step with the open chats. Qt-free.

Every write to the store goes through HistorySync (`_write`): the chats' own, and the
records other parts hand it (the API server's request stats, the stats panel's snapshots,
simulation runs and their results, history imports, and at open the writes an earlier
quit set aside, replayed before anything else: `replay_set_aside`).

What is written when (all through SafeStore, so a failed write is kept and retried):
a session row when a tab opens, and again (after `meta_delay_s`) when its title,
system prompt or settings change; its tab position on every add/close/move; a user
message when it is sent; a reply at its first token (incomplete), its text again at
most `checkpoint_s` after any new text arrived, and whole (complete, with its settings,
stats and finish reason, and the tool calls it made) when it ends, and again whenever
one of its calls' outcome changes; one request-stats row per finished request.
Every version is kept (a chat is a tree, app/message_tree.py), with the path the tab
shows (the session's shown_leaf_id); messages the user deletes are deleted, and saved
again by an undo. Timers run on the current asyncio loop (qasync's in the app).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from app.bridge import EngineBridge, Generation
from app.conversation import ChatMessage, Conversation
from app.events import Event
from app.paths import DB_FILE_NAME, data_dir, db_path
from app.storage import LoadedSession, SafeStore, StorageError
from app.storage.records import RequestStatsRecord, SimResult, SimRun, StatsSnapshot
from app.storage.replay import ReplayReport, replay
from app.storage.set_aside import SUFFIX as SET_ASIDE_SUFFIX

from . import convert, files
from .import_json import ImportReport

log = logging.getLogger(__name__)


@dataclass
class _Tracked:
    conv: Conversation
    position: int
    created_at: str | None = None
    saved: dict[str, str | None] = field(default_factory=dict)  # message id -> created_at
    last_checkpoint: dict[str, float] = field(default_factory=dict)
    listeners: list[tuple[Event, Callable[..., object]]] = field(default_factory=list)


class HistorySync:
    """`status_changed()` fires after writes that may change pending_count or last_error;
    `chats_changed()` after a chat is pinned, renamed, deleted or imported here."""

    def __init__(self, store: SafeStore, *, checkpoint_s: float = 1.0,
                 meta_delay_s: float = 0.5) -> None:
        self.store = store
        self.checkpoint_s = checkpoint_s
        self.meta_delay_s = meta_delay_s
        self.status_changed = Event()
        self._tracked: dict[str, _Tracked] = {}
        self._loaded: dict[str, LoadedSession] = {}  # read from the store, not attached yet
        self._due: dict[tuple[str, str], tuple[float, Callable[[], object]]] = {}
        self._handle: asyncio.TimerHandle | None = None
        self.replay_notice: str | None = None  # what the start's replay restored or kept
        # a chat was pinned, renamed, deleted or imported outside its tab (the sidebar
        # reads the list again)
        self.chats_changed = Event()

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, **kwargs: float) -> HistorySync:
        """On the database at `path` (else $BATCHCHAT_DB, else the data directory); never
        raises: a file that cannot be used leaves `last_error`/`notice` set. Writes set
        aside at an earlier quit are written back first (`replay_set_aside`)."""
        sync = cls(SafeStore.open(db_path(path)), **kwargs)
        sync.replay_set_aside()
        return sync

    def replay_set_aside(self) -> list[ReplayReport]:
        """Write back what an earlier quit set aside (disk full, database locked): the file
        next to the database, then the data directory's fallback (its lines for this
        database only). What it did goes into `notice`; a file stays where it is while the
        history cannot be written."""
        own = self.store.set_aside_path
        fallback = data_dir() / (DB_FILE_NAME + SET_ASIDE_SUFFIX)
        store = self.store.store
        reports, texts = [], []
        for path in dict.fromkeys(p for p in (own, fallback) if p is not None):
            if not path.is_file():
                continue
            if store is None or store.read_only:
                texts.append(f"Changes set aside when BatchChat last quit are kept in {path}; "
                             "they will be written back once the history can be saved.")
                continue
            report = replay(store, path, only_db=None if path == own else store.path)
            reports.append(report)
            texts.append(report.summary())
        self.replay_notice = " ".join(t for t in texts if t) or None
        return reports

    # -- status -------------------------------------------------------------------------
    @property
    def pending_count(self) -> int:
        return self.store.pending_count

    @property
    def last_error(self) -> StorageError | None:
        return self.store.last_error

    @property
    def notice(self) -> str | None:
        """What to tell the user once at start: the file set aside or read-only, and what
        was restored from an earlier quit's set-aside writes."""
        return " ".join(t for t in (self.store.notice, self.replay_notice) if t) or None

    def status_text(self) -> str:
        """One line for the status bar: empty while everything is saved."""
        n = self.store.pending_count
        if n == 0:
            return ""
        return f"History: {n} unsaved change{'s' if n != 1 else ''}, retrying"

    @property
    def set_aside_count(self) -> int:
        """Writes that could never succeed, kept in `store.set_aside_path` instead."""
        return len(self.store.rejected)

    def set_aside_text(self) -> str:
        """What to tell the user about the writes set aside ("" if none)."""
        n = len(self.store.rejected)
        if n == 0:
            return ""
        _write, err = self.store.rejected[-1]
        where = self.store.set_aside_path
        kept = f"It is kept in {where}." if where else "It is kept in memory only."
        return (f"{n} change{'s' if n != 1 else ''} to the history could not be saved and "
                f"{'were' if n != 1 else 'was'} set aside; everything else is saved as "
                f"usual. Latest reason: {err} {kept}")

    @property
    def in_memory_only(self) -> bool:
        """The history file cannot be written now (read-only, or not open at all): new
        chats and changes live in memory until saved elsewhere or the file is writable."""
        store = self.store.store
        return store is None or store.read_only

    def unsaved_text(self) -> str:
        """Why changes are unsaved, for the banner and the quit question ("" if none)."""
        n, err = self.store.pending_count, self.store.last_error
        if n == 0 and not self.in_memory_only:
            return ""
        store = self.store.store
        if store is not None and store.read_only:
            head = f"The history file {store.path} is read-only: past chats are shown"
        else:
            head = f"The history cannot be saved ({err})" if err else "The history is not open"
        changes = f"{n} unsaved change{'s' if n != 1 else ''}"
        return (f"{head}; new chats and changes are kept in memory only ({changes}). "
                "Save them to another file to keep them.")

    def move_to(self, path: str | os.PathLike[str]) -> bool:
        """Keep the history in the file at `path` from now on, with everything readable
        and unsaved; True when nothing is left unsaved. Raises StorageError."""
        try:
            return self.store.move_to(path)
        finally:
            self.status_changed.emit()

    def retry(self) -> bool:
        """Write what is queued (call on a timer); True when nothing is left."""
        done = self.store.retry_pending()
        self.status_changed.emit()
        return done

    # -- reading ------------------------------------------------------------------------
    def restore(self, bridge: EngineBridge) -> list[Conversation]:
        """The tabs that were open, in order, with their chats (empty if unreadable)."""
        try:
            sessions = self.store.reader.list_sessions(open_only=True)
        except StorageError as exc:
            log.warning("could not restore the open chats: %s", exc)
            return []
        convs = []
        for s in sessions:  # one chat that cannot be read costs only that tab
            try:
                convs.append(self.load_conversation(s.id, bridge))
            except (StorageError, KeyError, TypeError, ValueError) as exc:
                log.warning("could not restore chat %s (%s): %s", s.id, s.title, exc)
        return convs

    def load_conversation(self, session_id: str, bridge: EngineBridge) -> Conversation:
        """A saved session as a Conversation to show in a tab (then `attach` it).
        Raises StorageError or KeyError."""
        loaded = self.store.reader.load_session(session_id)
        self._loaded[session_id] = loaded
        return convert.conversation(loaded, bridge)

    # -- tabs ---------------------------------------------------------------------------
    def attach(self, conv: Conversation, position: int) -> None:
        """A tab shows `conv` now: save (or reopen) its session and follow its changes."""
        t = _Tracked(conv, position)
        loaded = self._loaded.pop(conv.session_id, None)
        if loaded is not None:
            t.created_at = loaded.session.created_at
            t.saved = {m.id: m.created_at for m in loaded.messages}
            if not loaded.session.is_open:
                self._write(self.store.open_session, conv.session_id)
        self._tracked[conv.session_id] = t
        if loaded is None:
            self._save_session(t)
            # a chat that comes with messages (a branch): they are new to the history too
            for msg in conv.tree.nodes.values():
                self._save_message(t, msg)
        def save_session_later() -> None:
            # delayed: a title typed or versions switched fast are written once
            self._later(("meta", conv.session_id), self.meta_delay_s,
                        lambda: self._save_session(t))

        for event, fn in (
            (conv.message_added, lambda msg: self._on_added(t, msg)),
            (conv.message_delta, lambda msg, _text: self._on_delta(t, msg)),
            (conv.message_finished, lambda msg: self._on_finished(t, msg)),
            (conv.removed, lambda msgs: self._on_removed(t, msgs)),
            (conv.message_tool_changed, lambda msg: self._on_tool_changed(t, msg)),
            (conv.meta_changed, save_session_later),
            (conv.shown_changed, save_session_later),  # the path shown is the session's
        ):
            event.connect(fn)
            t.listeners.append((event, fn))

    def detach(self, conv: Conversation) -> None:
        """The tab is closing (before its reply is cancelled): save what it shows, and keep
        it in the history as closed; a chat with no messages is not kept."""
        t = self._tracked.pop(conv.session_id, None)
        if t is None:
            return
        for event, fn in t.listeners:
            event.disconnect(fn)
        nodes = list(conv.tree.nodes.values())
        self._drop_due(conv.session_id, {m.id for m in nodes})
        if not nodes and not t.saved:
            self._write(self.store.delete_session, conv.session_id)
            return
        self._save_session(t)
        for msg in nodes:
            if msg.streaming:  # closing cancels it: keep what was shown, as stopped
                msg.streaming, msg.finish_reason = False, msg.finish_reason or "cancelled"
                self._save_message(t, msg)
                gen = _generation(conv, msg)
                if gen is not None and not gen.is_finished:  # its stats come when it ends
                    gen.done.connect(lambda g, t=t, m=msg: self._closed_reply_ended(t, m, g))
        self._write(self.store.close_session, conv.session_id)

    def set_tab_order(self, convs: list[Conversation]) -> None:
        ids = [c.session_id for c in convs if c.session_id in self._tracked]
        for position, session_id in enumerate(ids):
            self._tracked[session_id].position = position
        if ids:
            self._write(self.store.reorder_sessions, ids)

    def set_pinned(self, session_id: str, pinned: bool) -> None:
        """Pin a chat (the sidebar lists it first) or unpin it; open or not."""
        self._write(self.store.set_pinned, session_id, pinned)
        self.chats_changed.emit()

    def rename_session(self, session_id: str, title: str) -> None:
        """Rename a chat that no tab shows (an open one renames through its Conversation,
        so its tab follows)."""
        self._write(self.store.rename_session, session_id, title)
        self.chats_changed.emit()

    def delete_session(self, session_id: str) -> None:
        """Delete a session that no tab shows (detach it first)."""
        self._loaded.pop(session_id, None)
        self._write(self.store.delete_session, session_id)
        self.chats_changed.emit()

    # -- records the rest of the app hands in -------------------------------------------
    def record_request_stats(self, record: RequestStatsRecord) -> None:
        """A finished request's stats (the API server's; the tabs' are saved here)."""
        self._write(self.store.record_request_stats, record)

    def add_stats_snapshot(self, snapshot: StatsSnapshot) -> None:
        self._write(self.store.add_stats_snapshot, snapshot)

    def save_sim_run(self, run: SimRun) -> None:
        self._write(self.store.save_sim_run, run)

    def add_sim_results(self, results: list[SimResult]) -> None:
        self._write(self.store.add_sim_results, results)

    def delete_sim_run(self, run_id: str) -> None:
        self._write(self.store.delete_sim_run, run_id)

    def import_file(self, path: str | os.PathLike[str]) -> ImportReport:
        """Add what a BatchChat export holds that the history lacks: at once, not queued
        (app.history.files.import_file says why it failed, and nothing is added). Its chats
        come in closed: the tabs follow the workspace, and "open" in the file was another
        window's tab bar, so an imported chat is listed, and opened from the list."""
        try:
            return files.import_file(self.store, path, closed=True)
        finally:
            self.chats_changed.emit()

    def flush(self) -> None:
        """Write every delayed save and checkpoint now."""
        due, self._due = self._due, {}
        for _when, fn in due.values():
            fn()
        self._cancel_timer()

    def close(self, *, set_aside: bool = False) -> bool:
        """Flush, try the queue once more and close; False if some changes stay unsaved.

        `set_aside`: no one can be asked about what stays unsaved (the app was told to quit
        by SIGTERM or SIGHUP), so it goes to the set-aside file instead of being dropped:
        `<db>.set-aside.jsonl` next to the database, else in the data directory."""
        self.flush()
        done = self.store.close()
        if done:
            return True
        n, err = self.store.pending_count, self.store.last_error
        if set_aside:
            fallback = data_dir() / (DB_FILE_NAME + SET_ASIDE_SUFFIX)
            reason = f"not saved when the app was told to quit: {err}"
            if self.store.set_aside_pending(reason, fallback) is not None:
                return False
        log.error("%d history changes could not be saved: %s", n, err)
        return False

    # -- conversation events ------------------------------------------------------------
    def _on_added(self, t: _Tracked, msg: ChatMessage) -> None:
        if len(t.conv.tree.nodes) == 1:
            self._save_session(t)  # the first message names the chat: its title at once
        if not msg.streaming:  # a reply is saved at its first token
            self._save_message(t, msg)

    def _on_delta(self, t: _Tracked, msg: ChatMessage) -> None:
        if msg.id not in t.saved:
            self._save_message(t, msg)
            t.last_checkpoint[msg.id] = time.monotonic()
            return
        key = ("checkpoint", msg.id)
        if key in self._due:
            return
        wait = t.last_checkpoint.get(msg.id, 0.0) + self.checkpoint_s - time.monotonic()
        self._later(key, wait, lambda: self._checkpoint(t, msg))

    def _checkpoint(self, t: _Tracked, msg: ChatMessage) -> None:
        if msg.streaming and msg.id in t.saved:
            t.last_checkpoint[msg.id] = time.monotonic()
            self._write(self.store.checkpoint_message, msg.id, msg.content)

    def _on_finished(self, t: _Tracked, msg: ChatMessage) -> None:
        self._due.pop(("checkpoint", msg.id), None)
        t.last_checkpoint.pop(msg.id, None)
        gen = _generation(t.conv, msg)
        self._save_message(t, msg, gen)
        record = convert.request_stats_record(t.conv, msg, gen) if gen is not None else None
        if record is not None:
            self._write(self.store.record_request_stats, record)

    def _on_tool_changed(self, t: _Tracked, msg: ChatMessage) -> None:
        """A call's outcome changed (running, done, failed, denied): the reply is saved
        again with its calls and outcomes (it was saved whole, calls included, when it
        finished)."""
        if msg.id in t.saved and not msg.streaming:
            self._save_message(t, msg, _generation(t.conv, msg))

    def _closed_reply_ended(self, t: _Tracked, msg: ChatMessage, gen: Generation) -> None:
        """A reply cancelled by closing its tab has ended: its stats are saved like any
        other's (the text stays what the tab showed)."""
        if msg.request_id != gen.request_id or msg.id not in t.conv.tree.nodes:
            return
        msg.stats, msg.finish_reason, msg.error = gen.stats, gen.finish_reason, gen.error
        self._save_message(t, msg, gen)
        record = convert.request_stats_record(t.conv, msg, gen)
        if record is not None:
            self._write(self.store.record_request_stats, record)

    def _on_removed(self, t: _Tracked, messages: list[ChatMessage]) -> None:
        """Deleted messages leave the store (an undo saves them again)."""
        dropped = [m.id for m in messages if m.id in t.saved]
        self._drop_due(t.conv.session_id, set(dropped))
        for mid in reversed(dropped):  # replies before the messages they answer
            del t.saved[mid]
            self._write(self.store.delete_message, mid)

    # -- writing ------------------------------------------------------------------------
    def _save_session(self, t: _Tracked) -> None:
        self._due.pop(("meta", t.conv.session_id), None)
        record = convert.session_record(t.conv, position=t.position, is_open=True,
                                        created_at=t.created_at)
        t.created_at = record.created_at
        self._write(self.store.save_session, record)

    def _save_message(self, t: _Tracked, msg: ChatMessage,
                      gen: Generation | None = None) -> None:
        record = convert.message_record(t.conv, msg, created_at=t.saved.get(msg.id), gen=gen)
        t.saved[msg.id] = record.created_at
        self._write(self.store.save_message, record)

    def _write(self, method: Callable[..., bool], *args: object) -> None:
        before = (self.store.pending_count, self.store.last_error)
        method(*args)
        if (self.store.pending_count, self.store.last_error) != before:
            self.status_changed.emit()

    # -- delayed writes -----------------------------------------------------------------
    def _later(self, key: tuple[str, str], delay: float, fn: Callable[[], object]) -> None:
        self._due[key] = (time.monotonic() + max(0.0, delay), fn)
        self._arm()

    def _drop_due(self, session_id: str, message_ids: set[str]) -> None:
        for key in list(self._due):
            if key == ("meta", session_id) or (key[0] == "checkpoint" and key[1] in message_ids):
                del self._due[key]

    def _arm(self) -> None:
        self._cancel_timer()
        if self._due:
            wait = min(when for when, _fn in self._due.values()) - time.monotonic()
            self._handle = asyncio.get_event_loop().call_later(max(0.0, wait), self._run_due)

    def _run_due(self) -> None:
        self._handle = None
        now = time.monotonic()
        for key, (when, fn) in list(self._due.items()):
            if when <= now and self._due.get(key) == (when, fn):
                del self._due[key]
                fn()
        self._arm()

    def _cancel_timer(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def _generation(conv: Conversation, msg: ChatMessage) -> Generation | None:
    return next((g for g in reversed(conv.generations) if g.request_id == msg.request_id),
                None)
