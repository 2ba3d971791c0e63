"""The simulator's target: the local engine, BatchChat's own API server, or a connection."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QWidget

from app.remote import Connection
from app.settings import Settings
from app.simulator.targets import OWN_SERVER, own_server_connection

LOCAL = "local"
OWN = "own"


class TargetPicker(QComboBox):
    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("simTarget")
        self.setToolTip("Where the run sends its requests: the local engine (in-process), "
                        "BatchChat's own API server (Server → API server, over HTTP), or "
                        "any connection (Chat → Connections…)")
        self.settings = settings
        # as narrow as a dock needs (the list, when open, shows the whole names)
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(10)
        self._fill()
        settings.connections_changed.connect(self._fill)

    def detach(self) -> None:
        self.settings.connections_changed.disconnect(self._fill)

    @property
    def is_local(self) -> bool:
        return self.currentData() == LOCAL

    def choose(self, key: str) -> None:
        """LOCAL, OWN or a connection's name (tests)."""
        index = self.findData(key)
        if index < 0:
            raise KeyError(key)
        self.setCurrentIndex(index)

    def connection(self) -> Connection | None:
        """The chosen server (None: the local engine, or a connection deleted meanwhile)."""
        key = self.currentData()
        if key == LOCAL:
            return None
        if key == OWN:
            return own_server_connection(self.settings)
        return self.settings.connection(key)

    def _fill(self) -> None:
        current = self.currentData()
        self.blockSignals(True)
        self.clear()
        self.addItem("Local engine", LOCAL)
        self.addItem(f"{OWN_SERVER} (127.0.0.1:{self.settings.server_port})", OWN)
        for conn in self.settings.connections:
            self.addItem(conn.describe(), conn.name)
        self.setCurrentIndex(max(0, self.findData(current)) if current else 0)
        self.blockSignals(False)
