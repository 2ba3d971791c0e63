"""The strip above the tabs while the history cannot be written (a read-only file or
folder): says so, and offers to save the history to another file."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget


class HistoryBanner(QFrame):
    save_elsewhere = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("historyBanner")
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 6, 12, 6)
        self.label = QLabel()
        self.label.setWordWrap(True)
        row.addWidget(self.label, 1)
        self.button = QPushButton("Save to another file…")
        self.button.clicked.connect(self.save_elsewhere)
        row.addWidget(self.button)
        self.hide()

    def show_text(self, text: str) -> None:
        """Show `text`, or hide when it is empty."""
        self.label.setText(text)
        self.setVisible(bool(text))
