"""The history view (Ctrl+H): past sessions and simulation runs, search, open, delete,
export and import. A non-modal dialog; the work itself is in app.history.files."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPushButton,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.file_names import file_name
from app.history import files
from app.history.entries import ChatEdits
from app.history.files import HistoryEntry
from app.history.reader import HistoryReader
from app.storage import StorageError

from .. import file_dialogs
from ..widgets import confirm_delete
from .compare_view import CompareRunsDialog
from .match_delegate import MATCH_ROLE, MatchDelegate, plain

# (menu text, file filter, default suffix, action name, format)
EXPORTS = (
    ("Session as &Markdown…", "Markdown (*.md)", ".md", "session", "markdown"),
    ("Session as &JSON…", "JSON (*.json)", ".json", "session", "json"),
    ("&Everything as JSON…", "JSON (*.json)", ".json", "everything", "json"),
    ("Request &stats as CSV…", "CSV (*.csv)", ".csv", "stats", "csv"),
    ("Stats as J&SON…", "JSON (*.json)", ".json", "stats", "json"),
    ("Simulation &runs as CSV…", "CSV (*.csv)", ".csv", "sim_runs", "csv"),
    ("Simulation r&uns as JSON…", "JSON (*.json)", ".json", "sim_runs", "json"),
)
ROLE = Qt.ItemDataRole.UserRole


class HistoryDialog(QDialog):
    """`open_requested(session_id, message_id)` (message_id: a search hit's message, to
    show even in a version the chat does not show; "" for none); `delete_requested(kind,
    id)` after the user confirmed.

    `ask_save_path` / `ask_open_path` pick files (QFileDialog's static getters, called from
    plain slots); tests replace them."""

    open_requested = Signal(str, str)
    delete_requested = Signal(str, str)

    def __init__(self, reader: HistoryReader, edits: ChatEdits,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.reader = reader
        self.edits = edits  # imports
        self.setWindowTitle("History")
        self.resize(760, 520)
        self.entries: list[HistoryEntry] = []
        self.confirm_box: QMessageBox | None = None
        self.ask_save_path: Callable[[str, str], str] = self._ask_save_path
        self.ask_open_path: Callable[[], str] = self._ask_open_path
        # a chat's tab: "" (none), "open" or "writing" (a reply); the window's tabs say,
        # else the list's "(open)"
        self.tab_state: Callable[[str], str] = lambda session_id: "open" if any(
            e.id == session_id and e.is_open for e in self.entries) else ""

        self.search = QLineEdit()
        self.search.setPlaceholderText("Search titles, prompts and messages…")
        self.search.setToolTip("A reasoning model's thinking is not searched: only the "
                               "answers")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(lambda _text: self.refresh())
        self.list = QTreeWidget()
        self.list.setHeaderLabels(["Title", "Kind", "Items", "Last active", "Match"])
        self.list.setRootIsDecorated(False)
        for column, width in enumerate((250, 90, 50, 130)):
            self.list.setColumnWidth(column, width)
        self.list.setItemDelegateForColumn(4, MatchDelegate(self.list))
        self.list.itemDoubleClicked.connect(lambda *_: self.open_selected())
        # several runs can be selected (Ctrl/Shift+click) and compared side by side
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.itemSelectionChanged.connect(self._update_buttons)
        self.message = QLabel()
        self.message.setObjectName("historyMessage")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.open_button = QPushButton("Open in tab")
        self.open_button.clicked.connect(self.open_selected)
        self.delete_button = QPushButton("Delete…")
        self.delete_button.clicked.connect(self.delete_selected)
        self.export_button = QToolButton()
        self.export_button.setText("Export")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        self.export_actions = {}
        for text, filt, suffix, what, fmt in EXPORTS:
            action = menu.addAction(text)
            action.triggered.connect(
                lambda _=False, f=filt, s=suffix, w=what, m=fmt: self.export(w, m, None, f, s))
            self.export_actions[(what, fmt)] = action
        self.export_button.setMenu(menu)
        self.import_button = QPushButton("Import JSON…")
        self.import_button.clicked.connect(lambda: self.import_json())
        self.compare_button = QPushButton("Compare runs")
        self.compare_button.setToolTip("Select two or more simulation runs (Ctrl+click) to "
                                       "see their summaries side by side")
        self.compare_button.clicked.connect(lambda: self.compare_selected())

        row = QHBoxLayout()
        for w in (self.open_button, self.delete_button, self.export_button,
                  self.import_button, self.compare_button):
            row.addWidget(w)
        row.addStretch(1)
        col = QVBoxLayout(self)
        col.addWidget(self.search)
        col.addWidget(self.list, 1)
        col.addWidget(self.message)
        col.addLayout(row)
        self.refresh()

    # -- listing ------------------------------------------------------------------------
    def refresh(self) -> None:
        try:
            self.entries = files.list_entries(self.reader, self.search.text())
        except StorageError as exc:
            self.entries = []
            self.show_message(f"The history cannot be read: {exc}")
        self.list.clear()
        for entry in self.entries:
            kind = "chat (open)" if entry.is_open else "chat"
            if entry.kind == "sim_run":
                kind = "simulation"
            match = plain(entry.snippet)
            item = QTreeWidgetItem([entry.title, kind, str(entry.count), _when(entry.when),
                                    match])
            item.setData(0, ROLE, entry)
            item.setData(4, MATCH_ROLE, entry.snippet)  # the delegate bolds the match
            item.setToolTip(4, match)
            self.list.addTopLevelItem(item)
        if self.entries:
            self.list.setCurrentItem(self.list.topLevelItem(0))
        self._update_buttons()

    def selected(self) -> HistoryEntry | None:
        item = self.list.currentItem()
        return item.data(0, ROLE) if item is not None else None

    def select(self, entry_id: str) -> bool:
        for i in range(self.list.topLevelItemCount()):
            item = self.list.topLevelItem(i)
            if item.data(0, ROLE).id == entry_id:
                self.list.setCurrentItem(item)
                return True
        return False

    def show_message(self, text: str) -> None:
        self.message.setText(text)

    def selected_runs(self) -> list[HistoryEntry]:
        entries = [item.data(0, ROLE) for item in self.list.selectedItems()]
        return [e for e in entries if e.kind == "sim_run"]

    def compare_selected(self) -> CompareRunsDialog | None:
        """The selected runs side by side (None, with a message, unless 2 or more)."""
        chosen = self.selected_runs()
        if len(chosen) < 2:
            self.show_message("Select two or more simulation runs to compare them.")
            return None
        try:
            runs = [self.reader.load_sim_run(e.id) for e in chosen]
        except StorageError as exc:
            self.show_message(f"The runs cannot be read: {exc}")
            return None
        dialog = CompareRunsDialog(runs, self)
        dialog.show()
        return dialog

    def _update_buttons(self) -> None:
        self.compare_button.setEnabled(len(self.selected_runs()) >= 2)
        entry = self.selected()
        self.open_button.setEnabled(entry is not None and entry.kind == "session")
        self.delete_button.setEnabled(entry is not None)
        for (what, _fmt), action in self.export_actions.items():
            action.setEnabled(what != "session" or (entry is not None
                                                    and entry.kind == "session"))

    # -- actions ------------------------------------------------------------------------
    def open_selected(self) -> None:
        entry = self.selected()
        if entry is not None and entry.kind == "session":
            self.open_requested.emit(entry.id, entry.message_id or "")

    def delete_selected(self) -> QMessageBox | None:
        """Ask first, naming it (and saying its tab closes, if one shows it);
        `delete_requested` fires on Delete (Enter), nothing on Cancel (Esc)."""
        entry = self.selected()
        if entry is None:
            return None
        what = "chat" if entry.kind == "session" else "simulation run"
        text = f"Delete the {what} \u201c{entry.title}\u201d for good?"
        tab = self.tab_state(entry.id) if entry.kind == "session" else ""
        if tab == "writing":
            text += "\n\nIts open tab will close, and the reply it is writing stops."
        elif tab:
            text += "\n\nIts open tab will close."
        box = confirm_delete(self, "Delete from history", text,
                             lambda: self.delete_requested.emit(entry.kind, entry.id))
        box.finished.connect(lambda _r: setattr(self, "confirm_box", None))
        self.confirm_box = box
        return box

    def export(self, what: str, fmt: str, path: str | None = None,
               file_filter: str = "", suffix: str = "") -> bool:
        """Export to `path` (asked for when None). True when the file was written."""
        entry = self.selected()
        if what == "session" and (entry is None or entry.kind != "session"):
            self.show_message("Select a chat to export.")
            return False
        if path is None:
            name = file_name(entry.title) if what == "session" and entry \
                else f"batchchat-{what}"
            path = self.ask_save_path(name + suffix, file_filter)
            if not path:
                return False
        store = self.reader
        table = "csv" if fmt == "csv" else "json"
        try:
            if what == "session" and entry is not None:
                files.export_session(store, entry.id, path,
                                     "markdown" if fmt == "markdown" else "json")
            elif what == "everything":
                files.export_everything(store, path)
            elif what == "stats":
                files.export_stats(store, path, table)
            else:
                files.export_sim_runs(store, path, table)
        except (StorageError, OSError, KeyError) as exc:
            self.show_message(f"Export failed: {exc}")
            return False
        self.show_message(f"Exported to {path}.")
        return True

    def import_json(self, path: str | None = None) -> bool:
        path = path or self.ask_open_path()
        if not path:
            return False
        try:
            report = self.edits.import_file(path)
        except (StorageError, OSError, ValueError) as exc:
            self.show_message(f"Import failed: {exc}")
            return False
        self.refresh()
        text = report.summary()
        if report.session_ids and self.select(report.session_ids[0]):
            text += " Open in tab to continue a chat."  # imported chats come in closed
        self.show_message(text)
        return True

    def _ask_save_path(self, name: str, file_filter: str) -> str:
        path, _ = QFileDialog.getSaveFileName(self, "Export", file_dialogs.start_path(name),
                                              file_filter)
        file_dialogs.remember(path)
        return path

    def _ask_open_path(self) -> str:
        path, _ = QFileDialog.getOpenFileName(self, "Import a BatchChat export",
                                              file_dialogs.start_path(), "JSON (*.json)")
        file_dialogs.remember(path)
        return path


def _when(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return iso
