"""The strip under the sidebar's list after a delete: "Deleted "<title>"  [Undo]", for a
few seconds; `timed_out()` when the time is up without an undo."""

from __future__ import annotations

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from app.history.sidebar import one_line

UNDO_MS = 10_000


class UndoBar(QFrame):
    undo = Signal()
    timed_out = Signal()

    def __init__(self, parent: QWidget | None = None, timeout_ms: int = UNDO_MS) -> None:
        super().__init__(parent)
        self.setObjectName("undoBar")
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 6, 6)
        self.label = QLabel()
        self.label.setMinimumWidth(40)
        row.addWidget(self.label, 1)
        self.button = QPushButton("Undo")
        self.button.clicked.connect(self._undo)
        row.addWidget(self.button)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(timeout_ms)
        self.timer.timeout.connect(self._timed_out)
        self.hide()

    def show_deleted(self, title: str) -> None:
        """Offer to undo deleting `title` (the time starts again)."""
        self.label.setText(f"Deleted \u201c{one_line(title, 28)}\u201d")
        self.label.setToolTip(title)
        self.timer.start()
        self.show()

    def dismiss(self) -> None:
        self.timer.stop()
        self.hide()

    def _undo(self) -> None:
        self.dismiss()
        self.undo.emit()

    def _timed_out(self) -> None:
        self.hide()
        self.timed_out.emit()
