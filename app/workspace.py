"""The open chats, Qt-free: their order, the one in front, closed ones to reopen, drafts.

The window mirrors it (ui/chat_tabs.py): a tab is made when a chat is `opened`, removed
when it is `closed`, and brought forward on `front_changed`; what the user does to the tabs
(drag, click, close button) comes back here as `move`, `set_front` and `close`. The history
(app.history.writer) and the KV saver follow the chats from here, so no view wires them.
The Workspace is the one holder of the HistoryWriter (private); the rest of the app gets
the narrow entries it hands out (app/history/entries.py) and the `history_reader`.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

from .bridge import EngineBridge
from .conversation import Conversation
from .events import Event
from .history.entries import ApiResponses, ChatEdits, HistoryRecords, HistoryUpkeep
from .history.reader import HistoryReader
from .history.writer import HistoryWriter
from .kv_saver import KVSaver
from .settings import Settings
from .storage import StorageError

log = logging.getLogger(__name__)

CLOSED_KEPT = 20  # closed chats that Reopen can bring back
CLOSED_TAGS_KEPT = 200  # closed chats whose requests the stats panel still names


class Workspace:
    """Events: `opened(conv, index)`, `closed(conv, index)`, `moved(conv, index)`,
    `front_changed(conv)`, `reopenable_changed(bool)`, `draft_restored(conv, text)`,
    `draft_files_restored(conv, files)`."""

    def __init__(self, bridge: EngineBridge, settings: Settings,
                 history: HistoryWriter | None = None, kv_saver: KVSaver | None = None) -> None:
        self.bridge = bridge
        self.settings = settings
        self._history = history  # the store's one writer: held here only, never handed out
        # what the rest of the app may do to the history, each no more than its part needs
        self.records = HistoryRecords(history) if history is not None else None
        self.chat_edits = ChatEdits(history) if history is not None else None
        self.upkeep = HistoryUpkeep(history) if history is not None else None
        self.api_responses = ApiResponses(history) if history is not None else None
        self.kv_saver = kv_saver or KVSaver(bridge)  # open chats' KV to disk when idle
        self.conversations: list[Conversation] = []
        self.front: Conversation | None = None
        self.closed_stack: list[Conversation] = []  # most recently closed last
        self.closed_at: dict[int, int] = {}  # a closed_stack chat's tab index, by its id
        # a closed chat's request tag -> (session id, title): its requests keep its name
        self.closed_tags: dict[str, tuple[str, str]] = {}
        self.drafts: dict[int, str] = {}  # unsent text by Conversation.id
        # the unsent draft's files and images by Conversation.id, in their saved form
        # (#52): kept in the history (its content-addressed texts), not the settings file
        self.draft_files: dict[int, list[dict[str, Any]]] = {}
        self.closing = False  # the app is quitting: the last chat closed is not replaced
        self.opened = Event()
        self.closed = Event()
        self.moved = Event()
        self.front_changed = Event()
        self.reopenable_changed = Event()
        self.draft_restored = Event()
        self.draft_files_restored = Event()

    # -- opening and closing ------------------------------------------------------------
    def open(self, conversation: Conversation | None = None,
             at: int | None = None) -> Conversation:
        """A new chat, or `conversation` (restored or opened from the history), at the end
        (or at index `at`) and in front."""
        conv = conversation or self._new_conversation()
        index = len(self.conversations) if at is None \
            else max(0, min(at, len(self.conversations)))
        self.conversations.insert(index, conv)
        self.kv_saver.watch(conv)
        self.opened.emit(conv, index)
        self.set_front(conv)
        if self._history is not None:
            self._history.attach(conv, index)
            self._save_order()
        return conv

    def branch(self, conv: Conversation, index: int) -> Conversation:
        """A new chat with `conv`'s path up to message `index` (Conversation.branch), in a
        tab right after it, in front; the history saves it as any new chat."""
        at = self.conversations.index(conv) + 1 if conv in self.conversations else None
        return self.open(conv.branch(index), at=at)

    def _new_conversation(self) -> Conversation:
        """An empty chat with the app-wide defaults for new chats (app/defaults.py)."""
        s = self.settings
        params = s.new_tab_params()
        return Conversation(self.bridge, system_prompt=s.defaults.system_prompt,
                            params=params, preset=s.matching_preset(params),
                            default_title=f"Chat {self._free_number()}")

    def _free_number(self) -> int:
        """The lowest N no open chat is called "Chat N" by: after closing every tab the
        next one is "Chat 1" again, and a closed tab's number is used again first."""
        taken = {c.title for c in self.conversations}
        return next(n for n in itertools.count(1) if f"Chat {n}" not in taken)

    def close(self, conv: Conversation) -> None:
        """Close a chat; a reply it is generating is cancelled. The last one is replaced by
        a new chat unless the app is quitting."""
        if conv not in self.conversations:
            return
        index = self.conversations.index(conv)
        if self._history is not None:
            self._history.detach(conv)  # saves what it shows, before the reply is cancelled
        self.kv_saver.forget(conv)
        conv.close()
        self._remember_closed(conv, index)
        self.conversations.remove(conv)
        self.drafts.pop(conv.id, None)
        if self.draft_files.get(conv.id):  # a closed tab's draft leaves with it
            self.set_draft_files(conv, [])
        if self.front is conv:
            self.front = None
        self.closed.emit(conv, index)
        if self._history is not None:
            self._save_order()
        if not self.conversations and not self.closing:
            self.open()

    def move(self, conv: Conversation, index: int) -> None:
        """Put `conv` at `index` (a dragged tab); the history keeps the order."""
        if conv not in self.conversations or self.conversations.index(conv) == index:
            return
        self.conversations.remove(conv)
        self.conversations.insert(index, conv)
        self.moved.emit(conv, index)
        if self._history is not None:
            self._save_order()

    def set_front(self, conv: Conversation | None) -> None:
        if conv is self.front or (conv is not None and conv not in self.conversations):
            return
        self.front = conv
        self.front_changed.emit(conv)

    def rename(self, conv: Conversation, title: str) -> None:
        title = title.strip()
        if title:
            conv.rename(title)

    def find(self, session_id: str) -> Conversation | None:
        return next((c for c in self.conversations if c.session_id == session_id), None)

    def titles(self) -> dict[str, str]:
        """Each chat's title by its request tag (the stats panel names requests so): an
        open chat's title; a closed one's as "<title> (closed)", or its title now when it
        was opened again (a reopened chat is a new Conversation, with a new tag)."""
        open_now = {c.session_id: c for c in self.conversations}
        out = {}
        for tag, (session_id, title) in self.closed_tags.items():
            conv = open_now.get(session_id)
            out[tag] = conv.title if conv is not None else f"{title} (closed)"
        out.update((c.tag, c.title) for c in self.conversations)
        return out

    # -- the history --------------------------------------------------------------------
    @property
    def history_reader(self) -> HistoryReader | None:
        """The history, to read from (no write methods); None when the app keeps none."""
        return self._history.reader if self._history is not None else None

    def close_history(self, *, set_aside: bool = False) -> bool:
        """HistoryWriter.close: False if some changes stay unsaved; True with no history."""
        return self._history.close(set_aside=set_aside) if self._history is not None else True

    def restore(self) -> int:
        """Open the chats that were open at the last quit, the first in front; how many."""
        if self._history is None:
            return 0
        convs = self._history.restore(self.bridge)
        for conv in convs:
            self.open(conv)
        if convs:
            self.set_front(convs[0])
        return len(convs)

    def open_session(self, session_id: str, at: int | None = None) -> Conversation:
        """Bring a saved chat to the front, opening it (at the end, or at index `at`) if no
        tab shows it. Raises StorageError or KeyError when it cannot be read."""
        conv = self.find(session_id)
        if conv is None:
            if self._history is None:
                raise KeyError(session_id)
            conv = self.open(self._history.load_conversation(session_id, self.bridge), at=at)
        self.set_front(conv)
        return conv

    def delete_session(self, session_id: str) -> None:
        """Delete a saved chat from the history (closing it first if it is open)."""
        conv = self.find(session_id)
        if conv is not None:
            self.close(conv)
        if self._history is not None:
            self._history.delete_session(session_id)

    def reopen(self) -> Conversation | None:
        """Bring back the most recently closed chat: from the history when there is one (as
        saved at closing), else the conversation itself; where its tab was (or at the end,
        when fewer tabs are open now)."""
        while self.closed_stack:
            conv = self.closed_stack.pop()
            at = self.closed_at.pop(conv.id, None)
            self.reopenable_changed.emit(bool(self.closed_stack))
            if self._history is not None:
                try:
                    return self.open_session(conv.session_id, at=at)
                except (StorageError, KeyError) as exc:  # deleted meanwhile: the one before
                    log.info("cannot reopen %s: %s", conv.title, exc)
                    continue
            # a fresh Conversation: the closed tab's views still listen to the old one
            again = Conversation(
                conv.bridge, title=conv.title, system_prompt=conv.system_prompt,
                params=conv.params, session_id=conv.session_id, tree=conv.tree,
                preset=conv.preset,  # the whole tree: every version, the path shown
                model=conv.model)
            again.set_answers(conv.answers)  # the tab's ×N, as the history keeps it
            return self.open(again, at=at)
        return None

    def _remember_closed(self, conv: Conversation, index: int) -> None:
        if not conv.messages:
            return  # an empty chat is not worth reopening (nor kept in the history)
        self.closed_tags[conv.tag] = (conv.session_id, conv.title)
        for tag in list(self.closed_tags)[:-CLOSED_TAGS_KEPT]:
            del self.closed_tags[tag]
        for msg in conv.tree.nodes.values():  # a reply cut off by closing reads as stopped
            if msg.streaming:
                msg.streaming, msg.finish_reason = False, msg.finish_reason or "cancelled"
        self.closed_stack.append(conv)
        del self.closed_stack[:-CLOSED_KEPT]
        self.closed_at[conv.id] = index
        kept = {c.id for c in self.closed_stack}
        self.closed_at = {i: at for i, at in self.closed_at.items() if i in kept}
        self.reopenable_changed.emit(True)

    def _save_order(self) -> None:
        assert self._history is not None
        self._history.set_tab_order(self.conversations)

    # -- drafts -------------------------------------------------------------------------
    def set_draft(self, conv: Conversation, text: str) -> None:
        if text.strip():
            self.drafts[conv.id] = text
        else:
            self.drafts.pop(conv.id, None)

    def draft(self, conv: Conversation) -> str:
        return self.drafts.get(conv.id, "")

    def set_draft_files(self, conv: Conversation, files: list[dict[str, Any]]) -> None:
        """The draft's files and images now (app/attachments/stored.py's and app/images/
        stored.py's saved forms, in the chips' order): written to the history at once when
        they differ (a chip is added or removed: rare, unlike keystrokes)."""
        if _names(files) == _names(self.draft_files.get(conv.id, [])):
            return
        if files:
            self.draft_files[conv.id] = list(files)
        else:
            self.draft_files.pop(conv.id, None)
        if self._history is not None:
            self._history.save_draft_files(conv.session_id, list(files))

    def remember(self) -> None:
        """Unsent drafts (by session id) and the chat in front into the settings (the
        caller saves them)."""
        by_id = {c.id: c for c in self.conversations}
        self.settings.drafts = {by_id[i].session_id: text for i, text in self.drafts.items()
                                if i in by_id}
        if self.front is not None:
            self.settings.front_chat = self.front.session_id

    def restore_drafts(self) -> None:
        """The drafts saved at the last quit back into their chats; one whose chat did not
        come back (a new chat, an unreadable one) goes into an empty chat without a draft,
        else into a new chat. The chat that was in front comes back in front (or the one
        its draft went into), else the front one stays."""
        left = dict(self.settings.drafts)
        files_left = self._saved_draft_files()
        placed: dict[str, Conversation] = {}
        for conv in self.conversations:
            text = left.pop(conv.session_id, "")
            files = files_left.pop(conv.session_id, [])
            if (text or files) and not self._has_draft(conv):
                self._put_draft(conv, text, files, moved=False)
                placed[conv.session_id] = conv
        free = [c for c in self.conversations if not c.messages and not self._has_draft(c)]
        for session_id in dict.fromkeys([*left, *files_left]):
            conv = free.pop(0) if free else self.open()
            self._put_draft(conv, left.get(session_id, ""), files_left.get(session_id, []),
                            moved=True)
            if session_id in files_left and self._history is not None:
                self._history.save_draft_files(session_id, [])  # now under conv's id
            placed[session_id] = conv
        wanted = self.settings.front_chat
        front = (self.find(wanted) or placed.get(wanted)) if wanted else None
        front = front or self.front
        if front is not None:
            self.set_front(front)
            self.settings.front_chat = front.session_id  # its id now (a draft's chat: new)

    def _saved_draft_files(self) -> dict[str, list[dict[str, Any]]]:
        if self._history is None:
            return {}
        try:
            return self._history.reader.draft_files()
        except StorageError as exc:  # the drafts' text still comes back
            log.warning("the drafts' files could not be read: %s", exc)
            return {}

    def _has_draft(self, conv: Conversation) -> bool:
        return bool(self.draft(conv) or self.draft_files.get(conv.id))

    def _put_draft(self, conv: Conversation, text: str, files: list[dict[str, Any]], *,
                   moved: bool) -> None:
        """`moved`: the draft was another chat's (its files are written under this one)."""
        if text:
            self.set_draft(conv, text)
            self.draft_restored.emit(conv, text)
        if files:
            self.draft_files[conv.id] = list(files)
            if moved and self._history is not None:
                self._history.save_draft_files(conv.session_id, list(files))
            self.draft_files_restored.emit(conv, files)


def _names(files: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """What tells two drafts' files apart: each one's content hash and name, in order."""
    return [(str(f.get("hash")), str(f.get("name"))) for f in files]
