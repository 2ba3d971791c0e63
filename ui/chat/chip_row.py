"""A row of chips above the input (the draft's files, the draft's images): each chip is
added with the task that reads its item off the UI thread, and × removes it. The kinds of
chip differ; keeping, removing and cancelling them does not."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QSizePolicy, QWidget


class ChipRow(QWidget):
    """Chips in a row, hidden while there are none. `changed` after one is read, counted
    or removed (the subclasses emit it when their item arrives)."""

    changed = Signal()

    def __init__(self, object_name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(object_name)
        self.chips: list[Any] = []
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(0, 0, 0, 4)
        self._row.setSpacing(6)
        self._row.addStretch(1)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._tasks: set[asyncio.Future[None]] = set()
        self.hide()

    def _place(self, chip: Any, reading: Coroutine[Any, Any, None] | None) -> None:
        """Shows `chip` (which has a `removed` signal) and runs `reading` for it (None: its
        item is there already)."""
        chip.removed.connect(self.remove)
        self._row.insertWidget(self._row.count() - 1, chip)
        self.chips.append(chip)
        self.show()
        if reading is None:
            return
        task = asyncio.ensure_future(reading)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def remove(self, chip: QWidget) -> None:
        if chip in self.chips:
            self.chips.remove(chip)
            chip.deleteLater()
        self.setVisible(bool(self.chips))
        self.changed.emit()

    def clear(self) -> None:
        for chip in list(self.chips):
            self.chips.remove(chip)
            chip.deleteLater()
        self.hide()
        self.changed.emit()

    def detach(self) -> None:
        """Cancels the reads still running (the tab is going away)."""
        for task in list(self._tasks):
            task.cancel()
