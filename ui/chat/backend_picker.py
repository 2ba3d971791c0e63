"""The chat tab's backend picker: the local engine or one of the saved connections."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QWidget

from app.settings import Settings

LOCAL_TEXT = "Local engine"
MANAGE = "__manage__"  # the last item opens the connections dialog


class BackendPicker(QComboBox):
    """`chosen(name | None)` when the user picks a backend; `manage_requested()` for
    "Connections…". Follows the settings' connections as they change."""

    chosen = Signal(object)
    manage_requested = Signal()

    def __init__(self, settings: Settings, current: str | None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("backendPicker")
        self.setToolTip("Which server answers this chat: the local engine or a connection "
                        "(Chat → Connections…)")
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.settings = settings
        self._current = current
        self._fill()
        self.activated.connect(self._on_activated)
        settings.connections_changed.connect(self._fill)

    @property
    def backend(self) -> str | None:
        return self._current

    def set_backend(self, name: str | None) -> None:
        self._current = name
        self._fill()

    def detach(self) -> None:
        self.settings.connections_changed.disconnect(self._fill)

    def _fill(self) -> None:
        self.blockSignals(True)
        self.clear()
        self.addItem(LOCAL_TEXT, None)
        for conn in self.settings.connections:
            self.addItem(conn.describe(), conn.name)
        if self._current is not None and self.settings.connection(self._current) is None:
            self.addItem(f"{self._current} (deleted)", self._current)  # say so, keep it
        self.insertSeparator(self.count())
        self.addItem("Connections…", MANAGE)
        index = self.findData(self._current) if self._current is not None else 0
        self.setCurrentIndex(max(0, index))
        self.blockSignals(False)

    def _on_activated(self, index: int) -> None:
        data = self.itemData(index)
        if data == MANAGE:
            self.set_backend(self._current)  # show the tab's backend again
            self.manage_requested.emit()
            return
        if data != self._current:
            self._current = data
            self.chosen.emit(data)
