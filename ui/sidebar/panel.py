"""The sidebar: a search box over the list of chats, and the undo bar under it. Keeps
itself current from the Workspace's and the open chats' events (re-reading the store on
opens, closes and its own changes, and on a slow timer; never per token)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QSize, Qt, QTimer
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QLabel, QLineEdit, QVBoxLayout, QWidget

from app.conversation import Conversation
from app.history.sidebar import ChatList, ChatRow
from app.workspace import Workspace

from .actions import SidebarActions
from .list_view import ChatListView
from .undo_bar import UNDO_MS, UndoBar

SEARCH_DELAY_MS = 150  # search as you type, once typing pauses this long
SHOW_DELAY_MS = 150  # events from the chats are gathered this long before the list redraws
REREAD_MS = 60_000  # the store read again anyway: a day's change, other writers
STREAM_SHOW_MS = 500  # a streaming reply's preview is shown again at most this often


# a first start shows an empty list: say what will be in it
EMPTY_NOTE = "Your chats are listed here once they have a message: newest first, by day."


class Sidebar(QFrame):
    def __init__(self, workspace: Workspace, parent: QWidget | None = None,
                 undo_ms: int = UNDO_MS) -> None:
        super().__init__(parent)
        assert workspace.chat_edits is not None and workspace.history_reader is not None
        self.history = workspace.chat_edits  # its chats_changed: the list is read again
        self.setObjectName("sidebar")
        self.workspace = workspace
        self.chats = ChatList(workspace.history_reader, lambda: workspace.conversations)
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        self.search = QLineEdit()
        self.search.setObjectName("sidebarSearch")
        self.search.setPlaceholderText("Search chats")
        # a reasoning model's thinking is kept apart and not searched (issue #49)
        self.search.setToolTip("Searches titles, system prompts and messages' text; not "
                               "a reasoning model's thinking")
        self.search.setClearButtonEnabled(True)
        col.addWidget(self.search)
        # nothing found, an empty list, or why the history could not be read: under the
        # search box, where the eye is (below the list it sat at the window's bottom)
        self.note = QLabel()
        self.note.setObjectName("sidebarNote")
        self.note.setWordWrap(True)
        self.note.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.note.hide()
        col.addWidget(self.note)
        self.list = ChatListView()
        col.addWidget(self.list, 1)
        self.undo_bar = UndoBar(self, undo_ms)
        col.addWidget(self.undo_bar)
        self.actions = SidebarActions(workspace, self.chats, self.undo_bar, self)

        self._search_timer = _single_shot(self, SEARCH_DELAY_MS, self.show_list)
        self._show_timer = _single_shot(self, SHOW_DELAY_MS, lambda: self._show(False))
        self._reread_timer = _single_shot(self, SHOW_DELAY_MS, lambda: self._show(True))
        self._stream_timer = _single_shot(self, STREAM_SHOW_MS, lambda: self._show(False))
        self._slow_timer = QTimer(self)
        self._slow_timer.setInterval(REREAD_MS)
        self._slow_timer.timeout.connect(self.reread_later)
        self._slow_timer.start()
        # one follower per open chat (Conversation.id); dropping it stops its listeners
        self._following: dict[int, _ChatFollower] = {}

        self.search.textChanged.connect(lambda _t: self._search_timer.start())
        self.search.returnPressed.connect(self._open_first)
        self.search.installEventFilter(self)
        self.list.open_requested.connect(self.actions.open)
        self.list.pin_requested.connect(self.actions.toggle_pin)
        self.list.rename_requested.connect(self.actions.ask_rename)
        self.list.delete_requested.connect(self.actions.delete)
        self.actions.changed.connect(self._show)
        self.actions.failed.connect(self._tell)
        self.history.chats_changed.connect(self.reread_later)
        workspace.opened.connect(self._opened)
        workspace.closed.connect(self._closed)
        workspace.front_changed.connect(self._front_changed)
        for conv in workspace.conversations:
            self._follow(conv)
        self._show(True)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        # never forces the window wider: beside the chat's minimum and a dock, the sidebar
        # is what gives way (the splitter shrinks it before the chat)
        return QSize(0, super().minimumSizeHint().height())

    # -- showing ------------------------------------------------------------------------
    def show_list(self) -> None:
        """The grouped list, or the search's hits while the search box has text."""
        text = self.search.text().strip()
        front = self.workspace.front.session_id if self.workspace.front else None
        if self.list.hasFocus():
            front = None  # the row the user moved to stays selected
        if text:
            rows = self.chats.search(text)
            self.list.set_entries(list(rows), select=front)
            self._note(self.chats.error or ("" if rows else f"No chat has \u201c{text}\u201d."))
        else:
            entries = self.chats.entries()
            self.list.set_entries(entries, select=front)
            self._note(self.chats.error or ("" if entries else EMPTY_NOTE))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        """In the search box, Down moves into the list and Esc empties the box."""
        if watched is self.search and isinstance(event, QKeyEvent) \
                and event.type() == QEvent.Type.KeyPress:
            if event.key() == Qt.Key.Key_Down and self.list.rows():
                self.list.setFocus()
                if self.list.current_row() is None:
                    self.list.select(self.list.rows()[0].session_id)
                return True
            if event.key() == Qt.Key.Key_Escape and self.search.text():
                self.search.clear()
                return True
        return super().eventFilter(watched, event)

    def _open_first(self) -> None:
        """Enter in the search box opens the best hit (the search runs now if due)."""
        if self._search_timer.isActive():
            self._search_timer.stop()
            self.show_list()
        rows = self.list.rows()
        if rows:
            self.actions.open(rows[0])

    def reread_later(self) -> None:
        self._reread_timer.start()

    def _show(self, reread: bool) -> None:
        if reread:
            self.chats.refresh()
        elif self.search.text().strip():
            return  # the hits stay as found until the store is read again
        self.show_list()

    def _note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def _tell(self, text: str) -> None:
        self._note(text)

    def rows(self) -> list[ChatRow]:
        return self.list.rows()

    # -- following the chats ------------------------------------------------------------
    def _opened(self, conv: Conversation, _index: int) -> None:
        self._follow(conv)
        self.reread_later()

    def _closed(self, conv: Conversation, _index: int) -> None:
        self._following.pop(conv.id, None)  # its listeners go with it (held weakly)
        self.reread_later()

    def _front_changed(self, conv: Conversation | None) -> None:
        self.list.select(conv.session_id if conv is not None else None)

    def _follow(self, conv: Conversation) -> None:
        self._following[conv.id] = _ChatFollower(self, conv)

    def _chat_touched(self, session_id: str) -> None:
        self.chats.touch(session_id)
        self._show_timer.start()

    def _streamed(self) -> None:  # throttled, never per token: not restarted
        if not self._stream_timer.isActive():
            self._stream_timer.start()

    def _show_later(self) -> None:
        self._show_timer.start()

    # -- quitting -----------------------------------------------------------------------
    def finish(self) -> None:
        """The app is quitting: a delete waiting for its undo happens now."""
        self._slow_timer.stop()
        self.actions.commit_delete()
        self.history.chats_changed.disconnect(self.reread_later)  # (it outlives us)


class _ChatFollower:
    """The sidebar following one open chat's events: a new message moves it up the list,
    streamed text shows there now and then, anything else soon. Its listeners are bound
    methods, held weakly by the events, so the sidebar stops following by dropping it."""

    def __init__(self, sidebar: Sidebar, conv: Conversation) -> None:
        self.sidebar = sidebar
        self.session_id = conv.session_id
        conv.message_added.connect(self.added)
        conv.message_changed.connect(self.changed)
        for event in (conv.message_finished, conv.meta_changed, conv.messages_removed,
                      conv.path_changed):
            event.connect(self.later)

    def added(self, _msg: object) -> None:
        self.sidebar._chat_touched(self.session_id)

    def changed(self, _msg: object, what: str) -> None:
        if what == "text":
            self.sidebar._streamed()

    def later(self, *_a: object) -> None:
        self.sidebar._show_later()


def _single_shot(parent: QWidget, ms: int, fn: Callable[[], object]) -> QTimer:
    timer = QTimer(parent)
    timer.setSingleShot(True)
    timer.setInterval(ms)
    timer.timeout.connect(fn)
    return timer
