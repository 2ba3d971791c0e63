"""Pick a model to load: the bundled one, an mlx-lm directory, a GGUF file or a repo id."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from . import file_dialogs


class ModelPickerDialog(QDialog):
    """Non-blocking: call `open()`; `chosen(source)` fires on OK."""

    chosen = Signal(str)

    def __init__(self, current: str = "", reason: str = "",
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Load a model")
        self.setMinimumWidth(520)
        layout = QVBoxLayout(self)
        if reason:
            why = QLabel(reason)
            why.setObjectName("errorLabel")
            why.setWordWrap(True)
            layout.addWidget(why)
        layout.addWidget(QLabel('A model directory (mlx-lm), a .gguf file, a Hugging Face repo '
                                'id, or "bundled":'))
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
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Load")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def accept(self) -> None:
        source = self.source.text().strip()
        if not source:
            return
        super().accept()
        self.chosen.emit(source)

    def _bundled(self) -> None:
        self.source.setText("bundled")

    def _browse_dir(self) -> None:
        dialog = QFileDialog(self, "Model directory", file_dialogs.start_path())
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.fileSelected.connect(self.source.setText)
        dialog.fileSelected.connect(file_dialogs.remember)
        dialog.open()

    def _browse_file(self) -> None:
        dialog = QFileDialog(self, "GGUF file", file_dialogs.start_path(),
                             "GGUF models (*.gguf);;All files (*)")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(self.source.setText)
        dialog.fileSelected.connect(file_dialogs.remember)
        dialog.open()
