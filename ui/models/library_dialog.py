"""The model library: the models on this disk in a table (filter, Load), recent ones,
browse for a file or folder, add a folder to the library, download a repo by id (progress,
Cancel); then follow the load (progress bar, stage) here, or read why it failed (the
model in use keeps serving). Loading goes through MainWindow.load_model (via `chosen`),
which asks what to do with running replies."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QEvent, QItemSelection, QModelIndex, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QCloseEvent, QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QProgressBar,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.bridge import BridgeState, EngineBridge
from app.models.entry import ModelEntry
from app.models.library import list_models
from app.models.places import FOLDER
from app.models.pull import PullProgress
from app.settings import Settings

from .. import file_dialogs
from .download import Download
from .names import recent_label, short_name
from .table import COLUMNS, ModelFilter, ModelTable

BAR_STEPS = 1000


class ModelLibraryDialog(QDialog):
    """Non-blocking: call `open()`; `chosen(source)` fires on Load. With `bridge`, the
    dialog stays open while that load runs, shows its progress, closes when the model is
    ready, and shows the reason if it failed."""

    chosen = Signal(str)

    def __init__(self, current: str = "", reason: str = "",
                 parent: QWidget | None = None, *, recent: Sequence[str] = (),
                 bridge: EngineBridge | None = None,
                 settings: Settings | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Model library")
        self.setObjectName("modelLibrary")
        self.bridge = bridge
        self.settings = settings
        self._waiting_for: str | None = None  # the source this dialog asked to load
        layout = QVBoxLayout(self)
        self.error = QLabel(reason)
        self.error.setObjectName("errorLabel")
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.setVisible(bool(reason))
        layout.addWidget(self.error)

        layout.addLayout(self._make_filter_row())
        layout.addWidget(self._make_table(), 1)
        self.detail = QLabel()
        self.detail.setObjectName("modelDetail")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.detail)
        layout.addSpacing(4)

        layout.addWidget(QLabel("Recent:"))
        layout.addWidget(self._make_recent(recent))

        layout.addWidget(QLabel('Load: a model directory (mlx-lm), a .gguf file, a Hugging Face '
                                'repo id, or "bundled":'))
        row = QHBoxLayout()
        self.source = QLineEdit(current)
        self.source.setObjectName("modelSource")
        self.source.setPlaceholderText("bundled  ·  /path/to/model  ·  file.gguf  ·  org/repo")
        self.source.textChanged.connect(self._update_load_button)
        row.addWidget(self.source, 1)
        for text, slot in (("Bundled", self._bundled), ("Directory…", self._browse_dir),
                           ("GGUF file…", self._browse_file)):
            button = QPushButton(text)
            button.clicked.connect(slot)
            row.addWidget(button)
        layout.addLayout(row)

        layout.addLayout(self._make_download_row())
        self.download_status = QLabel()
        self.download_status.setObjectName("downloadStatus")
        self.download_status.setWordWrap(True)
        self.download_status.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse)
        self.download_status.hide()
        layout.addWidget(self.download_status)

        progress_row = QHBoxLayout()
        self.stage = QLabel()
        self.stage.setWordWrap(True)
        progress_row.addWidget(self.stage, 1)
        self.bar = QProgressBar()
        self.bar.setRange(0, 0)
        self.bar.setFormat("%p %")
        self.bar.setFixedWidth(200)
        progress_row.addWidget(self.bar)
        self.progress_box = QWidget()
        self.progress_box.setLayout(progress_row)
        self.progress_box.hide()
        layout.addWidget(self.progress_box)

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.load_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.load_button.setText("Load")
        self.buttons.button(QDialogButtonBox.StandardButton.Cancel).setText("Close")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)

        self.download = Download(self)
        self.download.progress.connect(self._download_progress)
        self.download.finished.connect(self._download_finished)
        self.download.failed.connect(self._download_failed)
        self._size_to(parent)
        self.refresh()
        self.select_source(current)  # the model in use (or the one that failed), if listed
        if bridge is not None:
            bridge.load_progress.connect(self._on_progress)
            bridge.load_failed.connect(self._on_failed)
            bridge.state_changed.connect(self._on_state)
            self._on_state(bridge.state, bridge.message)

    # -- building ---------------------------------------------------------------------
    def _make_filter_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.filter = QLineEdit()
        self.filter.setObjectName("modelFilter")
        self.filter.setPlaceholderText("Filter by name, architecture, quantization, place…")
        self.filter.setClearButtonEnabled(True)
        self.filter.installEventFilter(self)  # Enter filters; it must not press Load
        row.addWidget(self.filter, 1)
        self.add_folder_button = QPushButton("Add folder…")
        self.add_folder_button.setToolTip("Also list the models in a folder of yours")
        self.add_folder_button.clicked.connect(self._add_folder)
        row.addWidget(self.add_folder_button)
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh)
        row.addWidget(refresh)
        return row

    def _make_table(self) -> QTableView:
        self.models = ModelTable()
        self.proxy = ModelFilter(self.models)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.table = QTableView()
        self.table.setObjectName("modelTable")
        self.table.setModel(self.proxy)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # the library's own order
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setMinimumSectionSize(40)
        self.table.selectionModel().selectionChanged.connect(self._selected)
        self.table.doubleClicked.connect(self._activated)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._row_menu)
        return self.table

    def _row_menu(self, pos: QPoint) -> QMenu | None:
        """Right-click on a model from an added folder: stop listing that folder."""
        index = self.table.indexAt(pos)
        folder = self.added_folder_of(self.proxy.entry(index.row())) if index.isValid() \
            else None
        if folder is None:
            return None
        menu = QMenu(self)
        menu.addAction(f"Stop listing {folder}", lambda: self.remove_folder(folder))
        menu.popup(self.table.viewport().mapToGlobal(pos))
        return menu

    def added_folder_of(self, entry: ModelEntry) -> str | None:
        """The added folder `entry` was found in (None: found elsewhere)."""
        if self.settings is None or entry.path is None or entry.place != FOLDER:
            return None
        for folder in self.settings.model_folders:
            root = Path(folder).expanduser()
            if entry.path == root or root in entry.path.parents:
                return folder
        return None

    def _make_recent(self, recent: Sequence[str]) -> QListWidget:
        self.recent = QListWidget()
        self.recent.setObjectName("recentModels")
        for source in recent:
            item = QListWidgetItem(recent_label(source))
            item.setData(Qt.ItemDataRole.UserRole, source)
            item.setToolTip(source)
            self.recent.addItem(item)
        if not recent:
            placeholder = QListWidgetItem("None yet: models you load are listed here.")
            placeholder.setFlags(Qt.ItemFlag.NoItemFlags)
            self.recent.addItem(placeholder)
        row_h = self.recent.sizeHintForRow(0) if self.recent.count() else 20
        self.recent.setMaximumHeight(row_h * 3 + 2 * self.recent.frameWidth() + 2)
        self.recent.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.recent.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.recent.currentItemChanged.connect(self._recent_selected)
        self.recent.itemActivated.connect(lambda item: self._recent_activated(item))
        return self.recent

    def _make_download_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.addWidget(QLabel("Download:"))
        self.repo = QLineEdit()
        self.repo.setObjectName("downloadRepo")
        self.repo.setPlaceholderText("Hugging Face repo id: mlx-community/SmolLM2-360M-Instruct"
                                     " · a GGUF one: org/name:Q4_0")
        self.repo.installEventFilter(self)  # Enter downloads; it must not press Load
        row.addWidget(self.repo, 1)
        self.download_button = QPushButton("Download")
        self.download_button.clicked.connect(self.start_download)
        row.addWidget(self.download_button)
        self.download_bar = QProgressBar()
        self.download_bar.setRange(0, BAR_STEPS)
        self.download_bar.setFixedWidth(160)
        self.download_bar.hide()
        row.addWidget(self.download_bar)
        self.cancel_download_button = QPushButton("Cancel")
        self.cancel_download_button.setToolTip("Stop; Download again later goes on from here")
        self.cancel_download_button.clicked.connect(self.download_cancel)
        self.cancel_download_button.hide()
        row.addWidget(self.cancel_download_button)
        return row

    def _size_to(self, parent: QWidget | None) -> None:
        """Wide enough for the columns, never larger than the window it belongs to."""
        width, height = 900, 600
        if parent is not None and parent.isVisible():
            width = min(width, max(560, parent.width() - 40))
            height = min(height, max(420, parent.height() - 40))
        self.resize(width, height)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt
        """Enter in the download box downloads, in the filter box does nothing more: the
        dialog's default button (Load) would otherwise load whatever is selected."""
        repo = getattr(self, "repo", None)  # events come while the dialog is being built
        if watched in (repo, self.filter) and event.type() == QEvent.Type.KeyPress \
                and isinstance(event, QKeyEvent) \
                and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if watched is repo:
                self.start_download()
            return True
        return super().eventFilter(watched, event)

    # -- the list ---------------------------------------------------------------------
    def refresh(self) -> None:
        """Look on the disk again (after a download, an added folder, or Refresh)."""
        folders = self.settings.model_folders if self.settings is not None else []
        self.models.set_entries(list_models(folders))
        self._update_load_button()

    def entries(self) -> list[ModelEntry]:
        """The rows shown now (after the filter), top to bottom."""
        return [self.proxy.entry(r) for r in range(self.proxy.rowCount())]

    def select_source(self, source: str) -> bool:
        """Select the row of the model loaded from `source`; False if none is shown."""
        for r in range(self.proxy.rowCount()):
            if self.proxy.entry(r).source == source:
                self.table.selectRow(r)
                return True
        return False

    def _selected(self, _selected: QItemSelection, _deselected: QItemSelection) -> None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return
        entry = self.proxy.entry(rows[0].row())
        self.source.setText(entry.source)
        where = str(entry.path or entry.source)
        self._set_failed(self.detail, not entry.loads)
        if entry.loads:
            extra = f" · {entry.note}" if entry.note else ""
            self.detail.setText(f"{entry.format} · {where}{extra}")
        else:
            self.detail.setText(f"Does not load here: {entry.reason}\n{where}")
        self._update_load_button()

    def _activated(self, index: QModelIndex) -> None:
        if self.proxy.entry(index.row()).loads:
            self.accept()

    def _update_load_button(self) -> None:
        source = self.source.text().strip()
        unloadable = any(e.source == source and not e.loads for e in self.models.entries)
        loading = self.bridge is not None and self.bridge.state == BridgeState.LOADING
        self.load_button.setEnabled(bool(source) and not unloadable and not loading)

    def _add_folder(self) -> QFileDialog:
        dialog = QFileDialog(self, "Add a folder of models", file_dialogs.start_path())
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.fileSelected.connect(self.add_folder)
        dialog.open()
        return dialog

    def add_folder(self, folder: str) -> None:
        """List the models in `folder` from now on (kept in the settings)."""
        if folder and self.settings is not None:
            self.settings.add_model_folder(folder)
            file_dialogs.remember(folder)
            self.refresh()

    def remove_folder(self, folder: str) -> None:
        """Stop listing `folder` (its files stay where they are)."""
        if self.settings is not None:
            self.settings.remove_model_folder(folder)
            self.refresh()

    # -- downloading ------------------------------------------------------------------
    def start_download(self) -> None:
        repo = self.repo.text().strip()
        if not repo or self.download.running:
            return
        self._set_failed(self.download_status, False)
        self.download_status.setText(f"Downloading {repo} …")
        self.download_status.show()
        self.download_bar.setValue(0)
        self.download_bar.show()
        self.cancel_download_button.show()
        self.download_button.setEnabled(False)
        self.download.start(repo)

    def download_cancel(self) -> None:
        self.download.cancel()

    def _download_progress(self, p: PullProgress) -> None:
        self.download_bar.setValue(round(p.fraction * BAR_STEPS))
        self.download_status.setText(f"Downloading {self.download.repo}: {p.summary()}")

    def _download_ended(self) -> None:
        self.download_bar.hide()
        self.cancel_download_button.hide()
        self.download_button.setEnabled(True)

    def _download_finished(self, snapshot: str) -> None:
        self._download_ended()
        self.refresh()
        self.filter.clear()
        shown = self.select_source(snapshot)
        self.download_status.setText(f"Downloaded {self.download.repo}"
                                     + (": selected below, press Load." if shown else "."))

    def _download_failed(self, message: str, cancelled: bool) -> None:
        self._download_ended()
        self._set_failed(self.download_status, not cancelled)
        self.download_status.setText(message)
        self.refresh()  # a partial download is listed as such

    @staticmethod
    def _set_failed(label: QLabel, failed: bool) -> None:
        """Red (the stylesheet's [failed="true"]) or the usual colour."""
        label.setProperty("failed", "true" if failed else "false")
        label.style().unpolish(label)
        label.style().polish(label)

    # -- choosing ---------------------------------------------------------------------
    def accept(self) -> None:
        source = self.source.text().strip()
        if not source or not self.load_button.isEnabled():
            return
        if self.bridge is None:
            super().accept()
            self.chosen.emit(source)
            return
        self._waiting_for = source  # stay open: the load's progress shows here
        self.error.hide()
        self.chosen.emit(source)

    def done(self, result: int) -> None:
        self._detach()
        super().done(result)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        self._detach()
        super().closeEvent(event)

    def _detach(self) -> None:
        """Stop following the bridge (a load under way goes on; the banner shows it); a
        download stops (what arrived is kept: Download again resumes it)."""
        self.download.cancel()
        if self.bridge is not None:
            self.bridge.load_progress.disconnect(self._on_progress)
            self.bridge.load_failed.disconnect(self._on_failed)
            self.bridge.state_changed.disconnect(self._on_state)
            self.bridge = None

    def _recent_selected(self, item: QListWidgetItem | None, _previous: object = None) -> None:
        source = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if source:
            self.source.setText(source)

    def _recent_activated(self, item: QListWidgetItem) -> None:
        if item.data(Qt.ItemDataRole.UserRole):
            self._recent_selected(item)
            self.accept()

    def _bundled(self) -> None:
        self.source.setText("bundled")

    def _browse_dir(self) -> QFileDialog:
        dialog = QFileDialog(self, "Model directory", file_dialogs.start_path())
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.fileSelected.connect(self.source.setText)
        # the next browse opens beside this model, among its siblings, not inside it
        dialog.fileSelected.connect(lambda path: file_dialogs.remember(
            str(Path(path).parent) if path else ""))
        dialog.open()
        return dialog

    def _browse_file(self) -> QFileDialog:
        dialog = QFileDialog(self, "GGUF file", file_dialogs.start_path(),
                             "GGUF models (*.gguf);;All files (*)")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(self.source.setText)
        dialog.fileSelected.connect(file_dialogs.remember)
        dialog.open()
        return dialog

    # -- following the load -------------------------------------------------------------
    def _on_state(self, state: BridgeState, message: str) -> None:
        loading = state == BridgeState.LOADING
        self._update_load_button()  # one load at a time
        self.progress_box.setVisible(loading)
        if loading:
            self.stage.setText(message)
            self.bar.setRange(0, 0)
            if self.bridge is not None and self.bridge.progress is not None:
                self._on_progress(*self.bridge.progress)  # opened while a load runs
        elif state == BridgeState.READY and self._waiting_for is not None \
                and self.bridge is not None and self.bridge.source == self._waiting_for:
            self.accept_loaded()

    def accept_loaded(self) -> None:
        self._waiting_for = None
        super().accept()

    def _on_progress(self, stage: str, fraction: float) -> None:
        loading = self._waiting_for or (self.bridge.attempted if self.bridge else None) or ""
        self.stage.setText(f"Loading {short_name(loading)} — {stage}")  # the path is above
        self.bar.setRange(0, BAR_STEPS)
        self.bar.setValue(round(fraction * BAR_STEPS))

    def _on_failed(self, message: str) -> None:
        self._waiting_for = None
        kept = self.bridge is not None and self.bridge.local is not None
        note = f"\nThe model in use ({self.bridge.description}) keeps serving." if kept \
            and self.bridge is not None else ""
        self.error.setText(message + note)
        self.error.show()
        self.progress_box.hide()


__all__ = ["COLUMNS", "ModelLibraryDialog"]
