"""What the sidebar's commands do to a chat: open it in a tab, pin, rename, and delete
with undo (the row is hidden and the chat deleted for real only when the undo bar times
out, another delete replaces it, or the app quits)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QInputDialog, QWidget

from app.conversation import Conversation
from app.history.sidebar import ChatList, ChatRow
from app.storage import StorageError
from app.workspace import Workspace

from ..rename_dialog import ask_rename
from .undo_bar import UndoBar


@dataclass
class PendingDelete:
    """A chat deleted in the sidebar that an undo can still bring back."""

    session_id: str
    title: str
    was_open: bool  # its tab was closed by the delete: an undo opens it again
    draft: str  # its unsent text then
    tab_index: int | None = None  # where its tab was: an undo puts it back there
    # its draft's files and images then (#52), in their saved form
    draft_files: list[dict[str, Any]] = field(default_factory=list)


class SidebarActions(QObject):
    """`changed(reread)`: the list must be shown again (`reread`: read from the store
    too); `failed(text)`: a command could not be done (the reason, for the user)."""

    changed = Signal(bool)
    failed = Signal(str)

    def __init__(self, workspace: Workspace, chats: ChatList, undo_bar: UndoBar,
                 parent: QWidget) -> None:
        super().__init__(parent)
        assert workspace.chat_edits is not None
        self.workspace = workspace
        self.history = workspace.chat_edits  # pin and rename chats no tab shows
        self.chats = chats
        self.undo_bar = undo_bar
        self.parent_widget = parent
        self.pending: PendingDelete | None = None
        self.rename_dialog: QInputDialog | None = None
        undo_bar.undo.connect(self.undo_delete)
        undo_bar.timed_out.connect(self.commit_delete)
        workspace.opened.connect(self._opened)

    # -- open ---------------------------------------------------------------------------
    def open(self, row: ChatRow, at: int | None = None) -> Conversation | None:
        """Show the chat in front, opening a tab for it (at the end, or at index `at`) if
        none shows it; a search hit's message is shown (its version, if another one was
        shown)."""
        try:
            conv = self.workspace.open_session(row.session_id, at=at)
        except (StorageError, KeyError) as exc:
            self.failed.emit(f"Could not open \u201c{row.title}\u201d: {exc}")
            return None
        if (row.message_id and row.message_id in conv.tree.nodes
                and all(m.id != row.message_id for m in conv.messages)):
            conv.show(row.message_id)
        return conv

    # -- pin and rename -----------------------------------------------------------------
    def toggle_pin(self, row: ChatRow) -> None:
        self.history.set_pinned(row.session_id, not row.pinned)
        self.changed.emit(True)

    def ask_rename(self, row: ChatRow) -> QInputDialog:
        """The rename dialog (ui/rename_dialog.py, as a tab's) with the title to edit."""
        dialog = ask_rename(self.parent_widget, row.title,
                            lambda text: self.rename(row.session_id, text))
        dialog.finished.connect(lambda _r: setattr(self, "rename_dialog", None))
        self.rename_dialog = dialog
        return dialog

    def rename(self, session_id: str, title: str) -> None:
        """An open chat renames through its Conversation (its tab and the history follow);
        a closed one in the store. A blank title changes nothing."""
        title = title.strip()
        if not title:
            return
        conv = self.workspace.find(session_id)
        if conv is not None:
            self.workspace.rename(conv, title)
        else:
            self.history.rename_session(session_id, title)
        self.changed.emit(True)

    # -- delete with undo ---------------------------------------------------------------
    def delete(self, row: ChatRow) -> None:
        """Hide the chat and close its tab; it is deleted once the undo bar times out."""
        self.commit_delete()  # one undo at a time: an earlier delete happens now
        conv = self.workspace.find(row.session_id)
        draft = self.workspace.draft(conv) if conv is not None else ""
        index = self.workspace.conversations.index(conv) if conv is not None else None
        files = list(self.workspace.draft_files.get(conv.id, [])) if conv is not None else []
        self.pending = PendingDelete(row.session_id, row.title, conv is not None, draft,
                                     index, files)
        self.chats.hidden.add(row.session_id)
        if conv is not None:
            self.workspace.close(conv)  # saves it as it is: an undo opens it again
        self.undo_bar.show_deleted(row.title)
        self.changed.emit(False)

    def undo_delete(self) -> Conversation | None:
        """Bring the chat deleted last back into the list (and its tab, if it had one)."""
        pending, self.pending = self.pending, None
        self.undo_bar.dismiss()
        if pending is None:
            return None
        self.chats.hidden.discard(pending.session_id)
        conv = None
        if pending.was_open:
            conv = self.open(ChatRow(pending.session_id, pending.title, "",
                                     self.chats.clock()), at=pending.tab_index)
            if conv is not None and pending.draft:
                self.workspace.set_draft(conv, pending.draft)
                self.workspace.draft_restored.emit(conv, pending.draft)
            if conv is not None and pending.draft_files:  # its chips too
                self.workspace.set_draft_files(conv, pending.draft_files)
                self.workspace.draft_files_restored.emit(conv, pending.draft_files)
        self.changed.emit(True)
        return conv

    def commit_delete(self) -> None:
        """Delete the pending chat for real (the undo bar timed out, another delete came,
        or the app is quitting)."""
        pending, self.pending = self.pending, None
        self.undo_bar.dismiss()
        if pending is None:
            return
        self.workspace.delete_session(pending.session_id)
        self.chats.hidden.discard(pending.session_id)
        self.changed.emit(True)

    def _opened(self, conv: Conversation, _index: int) -> None:
        """Opened again meanwhile (Reopen closed tab, the History dialog): the user wants
        it after all, so it is not deleted."""
        if self.pending is not None and conv.session_id == self.pending.session_id:
            self.pending = None
            self.undo_bar.dismiss()
            self.chats.hidden.discard(conv.session_id)
            self.changed.emit(True)
