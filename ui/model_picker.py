"""Pick a model to load: a recent one, the bundled one, an mlx-lm directory, a GGUF file or
a repo id; then follow its load (progress bar, stage) in the dialog, or read why it failed
(the model in use keeps serving)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSize, Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from app.bridge import BridgeState, EngineBridge

from . import file_dialogs

BAR_STEPS = 1000


def short_name(source: str) -> str:
    """A model's name for a status line: its file or folder name, or the repo id."""
    if source == "bundled":
        return "the bundled model"
    return Path(source).name if source.startswith(("/", "~", ".")) else source


def recent_label(source: str) -> str:
    """How a recent model reads in the list: its file or folder name, then where it is."""
    if source == "bundled":
        return "Bundled model — SmolLM2-135M-Instruct"
    path = Path(source).expanduser()
    if source.startswith(("/", "~", ".")) or path.exists():
        return f"{path.name} — {path.parent}"
    return source  # a Hugging Face repo id


class _ListWide(QStyledItemDelegate):
    """Rows as wide as the list, not as their text: the view then elides a long one."""

    def sizeHint(self, option: QStyleOptionViewItem,  # noqa: N802 - Qt override
                 index: QModelIndex | QPersistentModelIndex) -> QSize:
        return QSize(0, super().sizeHint(option, index).height())


class ModelPickerDialog(QDialog):
    """Non-blocking: call `open()`; `chosen(source)` fires on Load. With `bridge`, the
    dialog stays open while that load runs, shows its progress, closes when the model is
    ready, and shows the reason if it failed."""

    chosen = Signal(str)

    def __init__(self, current: str = "", reason: str = "",
                 parent: QWidget | None = None, *, recent: Sequence[str] = (),
                 bridge: EngineBridge | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Load a model")
        self.setMinimumWidth(560)
        self.bridge = bridge
        self._waiting_for: str | None = None  # the source this dialog asked to load
        layout = QVBoxLayout(self)
        self.error = QLabel(reason)
        self.error.setObjectName("errorLabel")
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.setVisible(bool(reason))
        layout.addWidget(self.error)

        layout.addWidget(QLabel("Recent models:"))
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
        self.recent.setMaximumHeight(150)
        # a long path: … in its middle (name and folder ends in view), no sideways scroll
        self.recent.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.recent.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.recent.setItemDelegate(_ListWide(self.recent))
        self.recent.currentItemChanged.connect(self._recent_selected)
        self.recent.itemActivated.connect(lambda item: self._recent_activated(item))
        layout.addWidget(self.recent)

        layout.addWidget(QLabel('Or a model directory (mlx-lm), a .gguf file, a Hugging Face '
                                'repo id, or "bundled":'))
        self.source = QLineEdit(current)
        self.source.setPlaceholderText("bundled  ·  /path/to/model  ·  file.gguf  ·  org/repo")
        layout.addWidget(self.source)
        row = QHBoxLayout()
        for text, slot in (("Bundled", self._bundled), ("Directory…", self._browse_dir),
                           ("GGUF file…", self._browse_file)):
            button = QPushButton(text)
            button.clicked.connect(slot)
            row.addWidget(button)
        row.addStretch(1)
        layout.addLayout(row)

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
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        if bridge is not None:
            bridge.load_progress.connect(self._on_progress)
            bridge.load_failed.connect(self._on_failed)
            bridge.state_changed.connect(self._on_state)
            self._on_state(bridge.state, bridge.message)

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
        """Stop following the bridge (a load under way goes on; the banner shows it)."""
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
        self.load_button.setEnabled(not loading)  # one load at a time
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
