"""The history's place in a window: saving trouble in its status bar and banner, unsaved
changes retried on a timer, the history view, and the question before quitting unsaved.

The chats themselves are the Workspace's (it opens, closes and orders them, and keeps the
history in step); this knows the window only as a QMainWindow."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import QFileDialog, QLabel, QMainWindow, QMessageBox, QPushButton

from app.history.entries import ChatEdits, HistoryRecords, HistoryUpkeep
from app.history.reader import HistoryReader
from app.lifecycle import Lifecycle
from app.plural import counted
from app.storage import StorageError
from app.workspace import Workspace

from .. import file_dialogs
from . import words
from .banner import HistoryBanner
from .view import HistoryDialog

RETRY_MS = 3000


class HistoryController(QObject):
    """`banner` goes into the window's layout (the window places it); `label` is in its
    status bar."""

    def __init__(self, window: QMainWindow, workspace: Workspace,
                 lifecycle: Lifecycle) -> None:
        super().__init__(window)
        assert workspace.upkeep is not None and workspace.records is not None
        assert workspace.chat_edits is not None and workspace.history_reader is not None
        self.window = window
        self.workspace = workspace
        self.lifecycle = lifecycle
        self.history: HistoryUpkeep = workspace.upkeep  # the file's state and care
        self.records: HistoryRecords = workspace.records  # a simulation run's delete
        self.reader: HistoryReader = workspace.history_reader  # the dialog's, with its import
        self.chat_edits: ChatEdits = workspace.chat_edits
        self.dialog: HistoryDialog | None = None
        # the window's keys back to it when the dialog closes (its shortcuts work at once)
        self.refocus: Callable[[], None] = window.activateWindow
        self.notice_box: QMessageBox | None = None
        self.label = QLabel()
        self.label.setObjectName("historyStatus")
        self.label.hide()
        window.statusBar().addPermanentWidget(self.label)
        self.retry_timer = QTimer(self)
        self.retry_timer.setInterval(RETRY_MS)
        self.retry_timer.timeout.connect(self.retry)
        self.retry_timer.start()
        self.history.status_changed.connect(self.update_status)
        self._error_shown: str | None = None
        self._set_aside_shown = 0
        self.set_aside_box: QMessageBox | None = None
        self.banner = HistoryBanner()
        self.banner.save_elsewhere.connect(lambda: self.save_elsewhere())
        self.quit_box: QMessageBox | None = None
        self.quit_buttons: dict[str, QPushButton] = {}
        self._quit_anyway = False

    @property
    def unattended(self) -> bool:
        """Told to quit by SIGTERM/SIGHUP: nobody to ask (the lifecycle's flag)."""
        return self.lifecycle.unattended

    # -- history view -------------------------------------------------------------------
    def show_history(self) -> HistoryDialog:
        if self.dialog is None:
            self.dialog = HistoryDialog(self.reader, self.chat_edits, self.window)
            self.dialog.open_requested.connect(self.open_session)
            self.dialog.delete_requested.connect(self.delete)
            self.dialog.finished.connect(lambda _result: self.refocus())
            self.dialog.tab_state = self._tab_state
        else:
            self.dialog.show_message("")  # what the last visit did is old news
            self.dialog.refresh()
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    def open_session(self, session_id: str, message_id: str = "") -> bool:
        """Show a past session in front (opening a tab for it if none shows it), on the
        path through `message_id` when given (a search hit, maybe in another version)."""
        try:
            conv = self.workspace.open_session(session_id)
        except (StorageError, KeyError) as exc:
            self._tell(f"Could not open that chat: {exc}")
            return False
        if message_id in conv.tree.nodes:
            conv.show(message_id)
        if self.dialog is not None and self.dialog.isVisible():
            self.dialog.refresh()  # its Kind now says "(open)"; the chat stays selected
            self.dialog.select(session_id)
        self.window.activateWindow()
        return True

    def _tab_state(self, session_id: str) -> str:
        conv = self.workspace.find(session_id)
        return "" if conv is None else "writing" if conv.is_busy else "open"

    def delete(self, kind: str, entry_id: str) -> None:
        """Delete a chat (closing its tab) or a simulation run, and say so: in the dialog
        and the status bar, naming it and the tab that closed."""
        entries = self.dialog.entries if self.dialog is not None else []
        title = next((e.title for e in entries if e.id == entry_id), "")
        had_tab = kind == "session" and self.workspace.find(entry_id) is not None
        if kind == "session":
            self.workspace.delete_session(entry_id)
        else:
            self.records.delete_sim_run(entry_id)
        self.update_status()
        text = f"Deleted \u201c{title}\u201d" + ("; its tab was closed." if had_tab else ".")
        if self.dialog is not None:
            self.dialog.refresh()
        self._tell(text)

    # -- status -------------------------------------------------------------------------
    def retry(self) -> None:
        if self.history.pending_count:
            self.history.retry()
        self.update_status()

    def update_status(self) -> None:
        text = words.status_text(self.history.status())
        error = self.history.last_error
        self.label.setText(text)
        self.label.setToolTip(str(error) if error else "")
        self.label.setVisible(bool(text))
        message = str(error) if error is not None else None
        if message and message != self._error_shown:
            self.window.statusBar().showMessage(message, 15000)
        self._error_shown = message
        self.banner.show_text(words.unsaved_text(self.history.status())
                              if self.history.in_memory_only
                              else "")
        if self.history.set_aside_count > self._set_aside_shown:
            self._set_aside_shown = self.history.set_aside_count
            self._report_set_aside()

    def _report_set_aside(self) -> None:
        """One box for writes set aside: opened at the first, its text updated after."""
        text = words.set_aside_text(self.history.status())
        if self.set_aside_box is not None:
            self.set_aside_box.setText(text)
            return
        self.set_aside_box = self._open_box(text, "set_aside_box")

    def show_notice(self) -> QMessageBox | None:
        """Tell the user once what happened at startup (file set aside, read-only, ...)."""
        text = words.notice(self.history.status())
        error = self.history.last_error
        if not text and error is not None:
            text = str(error)
        self.update_status()
        if not text:
            return None
        self.notice_box = self._open_box(text, "notice_box")
        return self.notice_box

    def _open_box(self, text: str, attr: str) -> QMessageBox:
        """A non-modal warning that clears `self.<attr>` when it closes."""
        box = QMessageBox(QMessageBox.Icon.Warning, "BatchChat: history", text,
                          QMessageBox.StandardButton.Ok, self.window)
        box.setWindowModality(Qt.WindowModality.NonModal)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.finished.connect(lambda _r: setattr(self, attr, None))
        box.show()
        return box

    # -- saving elsewhere, and quitting with unsaved changes ------------------------------
    def save_elsewhere(self) -> bool:
        """Ask for a file and keep the history there from now on (past chats and unsaved
        changes); False if cancelled or it failed (the reason is shown)."""
        path = self.ask_save_path()
        if not path:
            return False
        try:
            self.history.move_to(path)
        except StorageError as exc:
            self._tell(f"Could not save the history to {path}: {exc}")
            self.update_status()
            return False
        self.update_status()
        if self.history.pending_count:
            n = self.history.pending_count
            self._tell(f"History moved to {path}, but {counted(n, 'change')} "
                       f"{'is' if n == 1 else 'are'} still unsaved: {self.history.last_error}")
            return False
        self._tell(f"History is now saved in {path}.")
        return True

    def ask_save_path(self) -> str:
        path, _ = QFileDialog.getSaveFileName(self.window, "Save the history to another file",
                                              file_dialogs.start_path("history.db"),
                                              "SQLite database (*.db)")
        file_dialogs.remember(path)
        return path

    def may_quit(self) -> bool:
        """True if the window may close now: everything is saved (after one more try) or
        the user chose to quit anyway; else asks (retry, save elsewhere, quit anyway)."""
        if self._quit_anyway:
            return True
        self.history.flush()
        if self.history.pending_count:
            self.history.retry()
        self.update_status()
        if not self.history.pending_count:
            return True
        self._ask_before_quitting()
        return False

    def _ask_before_quitting(self) -> None:
        n = self.history.pending_count
        text = (f"{n} change{'s' if n != 1 else ''} to the history could not be saved: "
                f"{self.history.last_error}\n\nIf you quit now, "
                f"{'they are' if n != 1 else 'it is'} lost.")
        if self.quit_box is not None:
            self.quit_box.setText(text)
            return
        box = QMessageBox(QMessageBox.Icon.Warning, "BatchChat: unsaved history", text,
                          QMessageBox.StandardButton.NoButton, self.window)
        self.quit_buttons = {
            "retry": box.addButton("Retry", QMessageBox.ButtonRole.AcceptRole),
            "elsewhere": box.addButton("Save to another file…",
                                       QMessageBox.ButtonRole.ActionRole),
            "anyway": box.addButton("Quit anyway", QMessageBox.ButtonRole.DestructiveRole),
            "cancel": box.addButton("Cancel", QMessageBox.ButtonRole.RejectRole),
        }
        box.setWindowModality(Qt.WindowModality.WindowModal)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.buttonClicked.connect(self._quit_answer)
        box.finished.connect(lambda _r: self._quit_box_closed(box))
        self.quit_box = box
        box.open()  # never exec(): we run inside qasync's loop

    def quit_anyway(self) -> None:
        """Close without saving what cannot be saved (the user said so)."""
        self._quit_anyway = True
        if self.quit_box is not None:
            self.quit_box.close()
        QTimer.singleShot(0, self.window.close)

    def quit_unattended(self) -> None:
        """Close with no one to answer (SIGTERM, SIGHUP): never asks (an open question is
        closed), and what still cannot be saved once the replies have ended is set aside
        at the very end (`HistoryWriter.close(set_aside=True)`, ui/startup.py), not dropped."""
        self.lifecycle.unattended = True
        self.quit_anyway()

    def _quit_answer(self, button: QPushButton) -> None:
        choice = next((k for k, b in self.quit_buttons.items() if b is button), "cancel")
        if choice == "anyway":
            self._quit_anyway = True
        elif choice == "elsewhere":
            self.save_elsewhere()
        elif choice == "retry":
            self.history.retry()
            self.update_status()
        if choice != "cancel":  # once this box has closed; asks again if still unsaved
            QTimer.singleShot(0, self.window.close)

    def _quit_box_closed(self, box: QMessageBox) -> None:
        if self.quit_box is box:
            self.quit_box, self.quit_buttons = None, {}

    def _tell(self, text: str) -> None:
        if self.dialog is not None and self.dialog.isVisible():
            self.dialog.show_message(text)
        self.window.statusBar().showMessage(text, 15000)

    def stop(self) -> None:
        self.retry_timer.stop()
