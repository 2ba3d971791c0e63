"""The tab's tools in its settings panel: which saved MCP servers' tools it offers (a
checkable list) and whether the model must call one (tool choice)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QLabel, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from app.settings import Settings

CHOICES = {"auto": "Model decides", "required": "Must call a tool", "none": "No calls"}


class ToolsBox(QWidget):
    """`changed()` on every edit; `params()` is {"mcp_servers", "tool_choice"} ({} when no
    server is on)."""

    changed = Signal()

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self._enabled: list[str] = []
        self._loading = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.servers = QListWidget()
        self.servers.setObjectName("toolServers")
        self.empty = QLabel("No MCP servers yet: Chat → MCP servers… adds them.")
        self.empty.setObjectName("hintLabel")
        self.empty.setWordWrap(True)
        self.choice = QComboBox()
        self.choice.setObjectName("toolChoice")
        for key, label in CHOICES.items():
            self.choice.addItem(label, key)
        layout.addWidget(self.servers)
        layout.addWidget(self.empty)
        layout.addWidget(self.choice)
        self.servers.itemChanged.connect(self._edited)
        self.choice.activated.connect(self._edited)
        settings.mcp_servers_changed.connect(self._fill)
        self._fill()

    def detach(self) -> None:
        self.settings.mcp_servers_changed.disconnect(self._fill)

    def params(self) -> dict[str, Any]:
        if not self._enabled:
            return {}
        return {"mcp_servers": list(self._enabled), "tool_choice": self.choice.currentData()}

    def set_params(self, params: dict[str, Any]) -> None:
        self._enabled = [s for s in params.get("mcp_servers") or [] if isinstance(s, str)]
        choice = params.get("tool_choice", "auto")
        index = self.choice.findData(choice)
        if index < 0 and isinstance(choice, str) and choice:  # a function's name
            self.choice.addItem(f"Must call {choice}", choice)
            index = self.choice.count() - 1
        self.choice.setCurrentIndex(max(index, 0))
        self._fill()

    def set_enabled_servers(self, names: list[str]) -> None:
        """Check exactly these servers (as the user would), then `changed`."""
        self._enabled = list(names)
        self._fill()
        self.changed.emit()

    def _fill(self) -> None:
        self._loading = True
        self.servers.clear()
        for server in self.settings.mcp_servers:
            item = QListWidgetItem(server.name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if server.name in self._enabled
                               else Qt.CheckState.Unchecked)
            item.setToolTip(server.where)
            self.servers.addItem(item)
        rows = min(max(self.servers.count(), 1), 4)  # as tall as its servers, up to 4 rows
        self.servers.setFixedHeight(rows * max(self.servers.sizeHintForRow(0), 18)
                                    + 2 * self.servers.frameWidth() + 2)
        has = bool(self.settings.mcp_servers)
        self.servers.setVisible(has)
        self.empty.setVisible(not has)
        self.choice.setEnabled(bool(self._enabled))
        self._loading = False

    def _edited(self, *_: Any) -> None:
        if self._loading:
            return
        self._enabled = [self.servers.item(i).text() for i in range(self.servers.count())
                         if self.servers.item(i).checkState() == Qt.CheckState.Checked]
        self.choice.setEnabled(bool(self._enabled))
        self.changed.emit()
