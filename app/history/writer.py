"""The history store's one writer: keeps it in step with the open chats. Qt-free.

Every write to the store goes through HistoryWriter (`_write`): the chats' own, and the
records other parts hand it (the API server's request stats, the stats panel's snapshots,
simulation runs and their results, history imports). The store is its own (`_store`), never
handed out: readers get `reader`, a HistoryReader with no write methods. The writer itself
is the Workspace's alone; other parts write through its entries (app/history/entries.py).
At open, the writes an earlier quit set aside are replayed before anything else
(app/history/restore.py).

What is written when (all through SafeStore, so a failed write is kept and retried):
a session row when a tab opens, and again (after `meta_delay_s`) when its title,
system prompt or settings change; its tab position on every add/close/move; a user
message when it is sent; a reply at its first token (incomplete), its text (and a reasoning
model's thinking) again at most `checkpoint_s` after any new text arrived, and whole
(complete, with its settings, stats and finish reason, and the tool calls it made) when
it ends, and again whenever one of its calls' outcome changes; one request-stats row per
finished request; a stored response of the in-app API server's /v1/responses when it is
stored or deleted (app/history/entries.py ApiResponses).
Every version is kept (a chat is a tree, app/message_tree.py), with the path the tab
shows (the session's shown_leaf_id); messages the user deletes are deleted, and saved
again by an undo. The delayed writes are app/history/timers.py's; what the state means
for the user is worded by ui/history/words.py from `status()`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.attachments import Attachment
from app.attachments.stored import to_saved
from app.bridge import EngineBridge, Generation
from app.conversation import ChatMessage, Conversation, MessageChange
from app.events import Event
from app.images.stored import to_saved as image_saved
from app.paths import db_path
from app.storage import LoadedSession, SafeStore, StorageError
from app.storage.records import RequestStatsRecord, SimResult, SimRun, StatsSnapshot

from . import convert, files, restore
from .import_json import ImportReport
from .reader import HistoryReader
from .status import HistoryStatus, StartReplay
from .timers import DueWrites

log = logging.getLogger(__name__)


@dataclass
class _Tracked:
    conv: Conversation
    position: int
    created_at: str | None = None
    saved: dict[str, str | None] = field(default_factory=dict)  # message id -> created_at
    last_checkpoint: dict[str, float] = field(default_factory=dict)
    listeners: list[tuple[Event, Callable[..., object]]] = field(default_factory=list)


class HistoryWriter:
    """`status_changed()` fires after writes that may change pending_count or last_error;
    `chats_changed()` after a chat is pinned, renamed, deleted or imported here."""

    def __init__(self, store: SafeStore, *, checkpoint_s: float = 1.0,
                 meta_delay_s: float = 0.5) -> None:
        self._store = store  # the one holder of the store's write methods
        self.reader = HistoryReader(store)
        self.checkpoint_s = checkpoint_s
        self.meta_delay_s = meta_delay_s
        self.status_changed = Event()
        self._tracked: dict[str, _Tracked] = {}
        self._loaded: dict[str, LoadedSession] = {}  # read from the store, not attached yet
        self._due = DueWrites()
        self.start_replay = StartReplay()  # what the start's replay restored or kept
        # a chat was pinned, renamed, deleted or imported outside its tab (the sidebar
        # reads the list again)
        self.chats_changed = Event()

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, **kwargs: float) -> HistoryWriter:
        """On the database at `path` (else $BATCHCHAT_DB, else the data directory); never
        raises: a file that cannot be used shows in `status()`. Writes set aside at an
        earlier quit are written back first."""
        return cls.over(SafeStore.open(db_path(path)), **kwargs)

    @classmethod
    def over(cls, store: SafeStore, **kwargs: float) -> HistoryWriter:
        """On an opened store (which the caller then leaves to it), set-aside writes
        replayed first, as `open` does."""
        writer = cls(store, **kwargs)
        writer.start_replay = restore.replay_set_aside(store)
        return writer

    # -- status -------------------------------------------------------------------------
    @property
    def pending_count(self) -> int:
        return self._store.pending_count

    @property
    def last_error(self) -> StorageError | None:
        return self._store.last_error

    @property
    def set_aside_count(self) -> int:
        """Writes that could never succeed, kept in the set-aside file instead."""
        return len(self._store.rejected)

    @property
    def in_memory_only(self) -> bool:
        """The history file cannot be written now (read-only, or not open at all): new
        chats and changes live in memory until saved elsewhere or the file is writable."""
        db = self._store.store
        return db is None or db.read_only

    def status(self) -> HistoryStatus:
        """The facts ui/history/words.py words: unsaved and set-aside writes, the file's
        state, what opening it and the start's replay found."""
        db = self._store.store
        rejected = self._store.rejected
        return HistoryStatus(
            pending=self._store.pending_count, last_error=self._store.last_error,
            in_memory_only=self.in_memory_only,
            read_only_path=db.path if db is not None and db.read_only else None,
            set_aside=len(rejected), latest_set_aside_reason=rejected[-1][1] if rejected else None,
            set_aside_path=self._store.set_aside_path, store_notice=self._store.notice,
            start_replay=self.start_replay)

    def move_to(self, path: str | os.PathLike[str]) -> bool:
        """Keep the history in the file at `path` from now on, with everything readable
        and unsaved; True when nothing is left unsaved. Raises StorageError."""
        try:
            return self._store.move_to(path)
        finally:
            self.status_changed.emit()

    def retry(self) -> bool:
        """Write what is queued (call on a timer); True when nothing is left."""
        done = self._store.retry_pending()
        self.status_changed.emit()
        return done

    # -- reading ------------------------------------------------------------------------
    def restore(self, bridge: EngineBridge) -> list[Conversation]:
        """The tabs that were open, in order, with their chats (empty if unreadable)."""
        convs = []
        for loaded, conv in restore.open_chats(self.reader, bridge):
            self._loaded[loaded.session.id] = loaded  # `attach` knows what is saved
            convs.append(conv)
        return convs

    def load_conversation(self, session_id: str, bridge: EngineBridge) -> Conversation:
        """A saved session as a Conversation to show in a tab (then `attach` it).
        Raises StorageError or KeyError."""
        loaded = restore.load(self.reader, session_id)
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
                self._write(self._store.open_session, conv.session_id)
        self._tracked[conv.session_id] = t
        if loaded is None:
            self._save_session(t)
            # a chat that comes with messages (a branch): they are new to the history too
            for msg in conv.tree.nodes.values():
                self._save_message(t, msg)
        def save_session_later() -> None:
            # delayed: a title typed or versions switched fast are written once
            self._due.later(("meta", conv.session_id), self.meta_delay_s,
                            lambda: self._save_session(t))

        for event, fn in (
            (conv.message_added, lambda msg: self._on_added(t, msg)),
            (conv.message_changed, lambda msg, what: self._on_changed(t, msg, what)),
            (conv.message_finished, lambda msg: self._on_finished(t, msg)),
            (conv.messages_removed, lambda msgs: self._on_removed(t, msgs)),
            (conv.meta_changed, save_session_later),
            (conv.path_changed, save_session_later),  # the path shown is the session's
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
        self._due.drop_chat(conv.session_id, {m.id for m in nodes})
        if not nodes and not t.saved:
            self._write(self._store.delete_session, conv.session_id)
            return
        self._save_session(t)
        for msg in nodes:
            if msg.streaming:  # closing cancels it: keep what was shown, as stopped
                msg.streaming, msg.finish_reason = False, msg.finish_reason or "cancelled"
                self._save_message(t, msg)
                gen = _generation(conv, msg)
                if gen is not None and not gen.is_finished:  # its stats come when it ends
                    gen.done.connect(lambda g, t=t, m=msg: self._closed_reply_ended(t, m, g))
        self._write(self._store.close_session, conv.session_id)

    def set_tab_order(self, convs: list[Conversation]) -> None:
        ids = [c.session_id for c in convs if c.session_id in self._tracked]
        for position, session_id in enumerate(ids):
            self._tracked[session_id].position = position
        if ids:
            self._write(self._store.reorder_sessions, ids)

    def set_pinned(self, session_id: str, pinned: bool) -> None:
        """Pin a chat (the sidebar lists it first) or unpin it; open or not."""
        self._write(self._store.set_pinned, session_id, pinned)
        self.chats_changed.emit()

    def rename_session(self, session_id: str, title: str) -> None:
        """Rename a chat that no tab shows (an open one renames through its Conversation,
        so its tab follows)."""
        self._write(self._store.rename_session, session_id, title)
        self.chats_changed.emit()

    def delete_session(self, session_id: str) -> None:
        """Delete a session that no tab shows (detach it first)."""
        self._loaded.pop(session_id, None)
        self._write(self._store.delete_session, session_id)
        self.chats_changed.emit()

    def save_draft_files(self, session_id: str, files: list[dict[str, Any]]) -> None:
        """The files and images of chat `session_id`'s unsent draft, in their saved form
        ([]: none), so they come back after a restart (the Workspace's drafts)."""
        self._write(self._store.save_draft_files, session_id, files)

    # -- records the rest of the app hands in -------------------------------------------
    def record_request_stats(self, record: RequestStatsRecord) -> None:
        """A finished request's stats (the API server's; the tabs' are saved here)."""
        self._write(self._store.record_request_stats, record)

    def add_stats_snapshot(self, snapshot: StatsSnapshot) -> None:
        self._write(self._store.add_stats_snapshot, snapshot)

    def save_sim_run(self, run: SimRun) -> None:
        self._write(self._store.save_sim_run, run)

    def add_sim_results(self, results: list[SimResult]) -> None:
        self._write(self._store.add_sim_results, results)

    def delete_sim_run(self, run_id: str) -> None:
        self._write(self._store.delete_sim_run, run_id)

    def put_api_response(self, response_id: str, items: list[dict[str, Any]],
                         response: dict[str, Any]) -> bool:
        """A response the app's API server stored (#53); True: written now (else queued)."""
        return self._write(self._store.put_api_response, response_id, items, response)

    def delete_api_response(self, response_id: str) -> bool:
        return self._write(self._store.delete_api_response, response_id)

    def import_file(self, path: str | os.PathLike[str]) -> ImportReport:
        """Add what a BatchChat export holds that the history lacks: at once, not queued
        (app.history.files.import_file says why it failed, and nothing is added). Its chats
        come in closed: the tabs follow the workspace, and "open" in the file was another
        window's tab bar, so an imported chat is listed, and opened from the list."""
        try:
            return files.import_file(self._store, path, closed=True)
        finally:
            self.chats_changed.emit()

    def flush(self) -> None:
        """Write every delayed save and checkpoint now."""
        self._due.flush()

    def close(self, *, set_aside: bool = False) -> bool:
        """Flush, try the queue once more and close; False if some changes stay unsaved.

        `set_aside`: no one can be asked about what stays unsaved (the app was told to quit
        by SIGTERM or SIGHUP), so it goes to the set-aside file instead of being dropped:
        `<db>.set-aside.jsonl` next to the database, else in the data directory."""
        self.flush()
        done = self._store.close()
        if done:
            return True
        n, err = self._store.pending_count, self._store.last_error
        if set_aside:
            fallback = restore.fallback_set_aside_path()
            reason = f"not saved when the app was told to quit: {err}"
            if self._store.set_aside_pending(reason, fallback) is not None:
                return False
        log.error("%d history changes could not be saved: %s", n, err)
        return False

    # -- conversation events ------------------------------------------------------------
    def _on_added(self, t: _Tracked, msg: ChatMessage) -> None:
        if len(t.conv.tree.nodes) == 1:
            self._save_session(t)  # the first message names the chat: its title at once
        if not msg.streaming:  # a reply is saved at its first token
            self._save_message(t, msg)

    def _on_changed(self, t: _Tracked, msg: ChatMessage, what: MessageChange) -> None:
        if what == "text":
            self._on_delta(t, msg)
        elif what == "tools":
            self._on_tool_changed(t, msg)  # a wait note is never saved

    def _on_delta(self, t: _Tracked, msg: ChatMessage) -> None:
        if msg.id not in t.saved:
            self._save_message(t, msg)
            t.last_checkpoint[msg.id] = time.monotonic()
            return
        key = ("checkpoint", msg.id)
        if key in self._due:
            return
        wait = t.last_checkpoint.get(msg.id, 0.0) + self.checkpoint_s - time.monotonic()
        self._due.later(key, wait, lambda: self._checkpoint(t, msg))

    def _checkpoint(self, t: _Tracked, msg: ChatMessage) -> None:
        if msg.streaming and msg.id in t.saved:
            t.last_checkpoint[msg.id] = time.monotonic()
            # the thinking too, so a kill during a long thought keeps the thought
            self._write(self._store.checkpoint_message, msg.id, msg.content,
                        msg.reasoning or None)

    def _on_finished(self, t: _Tracked, msg: ChatMessage) -> None:
        self._due.drop(("checkpoint", msg.id))
        t.last_checkpoint.pop(msg.id, None)
        gen = _generation(t.conv, msg)
        self._save_message(t, msg, gen)
        record = convert.request_stats_record(t.conv, msg, gen) if gen is not None else None
        if record is not None:
            self._write(self._store.record_request_stats, record)

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
            self._write(self._store.record_request_stats, record)

    def _on_removed(self, t: _Tracked, messages: list[ChatMessage]) -> None:
        """Deleted messages leave the store (an undo saves them again)."""
        dropped = [m.id for m in messages if m.id in t.saved]
        self._due.drop_chat(t.conv.session_id, set(dropped))
        for mid in reversed(dropped):  # replies before the messages they answer
            del t.saved[mid]
            self._write(self._store.delete_message, mid)

    # -- writing ------------------------------------------------------------------------
    def _save_session(self, t: _Tracked) -> None:
        self._due.drop(("meta", t.conv.session_id))
        record = convert.session_record(t.conv, position=t.position, is_open=True,
                                        created_at=t.created_at)
        t.created_at = record.created_at
        self._write(self._store.save_session, record)

    def _save_message(self, t: _Tracked, msg: ChatMessage,
                      gen: Generation | None = None) -> None:
        record = convert.message_record(t.conv, msg, created_at=t.saved.get(msg.id), gen=gen)
        first = msg.id not in t.saved
        t.saved[msg.id] = record.created_at
        self._write(self._store.save_message, record)
        files = [to_saved(a) for a in msg.attachments if isinstance(a, Attachment)] \
            + [image_saved(i) for i in msg.images]  # images (#52): in the files' tables
        if first and files:  # a message's files are written once, after its row (#51)
            self._write(self._store.save_attachments, msg.id, files)

    def _write(self, method: Callable[..., bool], *args: object) -> bool:
        """True: written now; False: queued, retried later."""
        before = (self._store.pending_count, self._store.last_error)
        done = method(*args)
        if (self._store.pending_count, self._store.last_error) != before:
            self.status_changed.emit()
        return done


def _generation(conv: Conversation, msg: ChatMessage) -> Generation | None:
    return next((g for g in reversed(conv.generations) if g.request_id == msg.request_id),
                None)
