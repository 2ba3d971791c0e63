"""The strip above the tabs while a model loads (busy bar, elapsed time) or failed to."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from app.engine_bridge import BridgeState


class LoadBanner(QFrame):
    choose_model = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("loadBanner")
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 6, 12, 6)
        self.label = QLabel()
        self.label.setWordWrap(True)
        row.addWidget(self.label, 1)
        self.bar = QProgressBar()
        self.bar.setRange(0, 0)  # busy: the loader reports no fraction
        self.bar.setFixedWidth(160)
        self.bar.setTextVisible(False)
        row.addWidget(self.bar)
        self.button = QPushButton("Choose model…")
        self.button.clicked.connect(self.choose_model)
        row.addWidget(self.button)
        self._message = ""
        self._started = 0.0
        self._timer = QTimer(self)
        self._timer.setInterval(250)
        self._timer.timeout.connect(self._tick)

    def show_state(self, state: BridgeState, message: str) -> None:
        self._message = message
        loading = state == BridgeState.LOADING
        failed = state == BridgeState.FAILED
        self.setProperty("failed", "true" if failed else "false")
        self.style().unpolish(self)
        self.style().polish(self)
        self.bar.setVisible(loading)
        self.button.setVisible(failed or state == BridgeState.EMPTY)
        self.setVisible(loading or failed or state == BridgeState.EMPTY)
        if loading:
            self._started = time.perf_counter()
            self._timer.start()
        else:
            self._timer.stop()
        self._tick()

    def _tick(self) -> None:
        if self._timer.isActive():
            elapsed = time.perf_counter() - self._started
            self.label.setText(f"{self._message}  ({elapsed:.0f} s)")
        else:
            self.label.setText(self._message or "No model loaded.")
