"""Chat → MCP servers…: add, edit, remove and test MCP servers (a stdio command line or a
streamable-HTTP URL) and see their tools. Saved to the settings at once; testing runs on the
app's asyncio loop (the dialog stays responsive while a server starts)."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.context import AppContext
from app.mcp import McpConfigError, McpError, McpServerConfig, ToolInfo

from ..widgets import double_box


class McpServersDialog(QDialog):
    """Non-modal (`show()`). `test_task` is the running test (tests await it)."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("MCP servers")
        self.setObjectName("mcpServersDialog")
        self.resize(760, 460)
        self.ctx = ctx
        self.settings = ctx.settings
        self._editing: str | None = None
        self.test_task: asyncio.Future[list[ToolInfo] | None] | None = None

        self.list = QListWidget()
        self.list.setObjectName("mcpServerList")
        self.list.setMinimumWidth(180)
        self.list.currentRowChanged.connect(self._show_row)
        new_button = QPushButton("New")
        new_button.clicked.connect(self.new_server)
        self.delete_button = QPushButton("Remove")
        self.delete_button.clicked.connect(self.delete_current)
        left = QVBoxLayout()
        left.addWidget(self.list, 1)
        row = QHBoxLayout()
        row.addWidget(new_button)
        row.addWidget(self.delete_button)
        left.addLayout(row)

        self.name = QLineEdit()
        self.name.setPlaceholderText("e.g. files")
        self.command = QLineEdit()
        self.command.setPlaceholderText("stdio: a command line, e.g. uvx mcp-server-time")
        self.url = QLineEdit()
        self.url.setPlaceholderText("or streamable HTTP: http://127.0.0.1:8000/mcp")
        self.timeout = double_box(1.0, 3600.0, 5.0, " s", decimals=0)
        self.timeout.setToolTip("How long a tool call (or starting the server) may take")
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow("Command", self.command)
        form.addRow("URL", self.url)
        form.addRow("Timeout", self.timeout)
        self.status = QLabel()
        self.status.setObjectName("mcpStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.tools = QTreeWidget()
        self.tools.setObjectName("mcpTools")
        self.tools.setHeaderLabels(["Tool", "Description"])
        self.tools.setRootIsDecorated(False)
        self.tools.setColumnWidth(0, 160)
        self.test_button = QPushButton("Test")
        self.test_button.setToolTip("Start or connect to the server and list its tools")
        self.test_button.clicked.connect(lambda: self.start_test())
        self.save_button = QPushButton("Save server")
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self.save_current)
        right = QVBoxLayout()
        right.addLayout(form)
        buttons = QHBoxLayout()
        buttons.addWidget(self.test_button)
        buttons.addStretch(1)
        buttons.addWidget(self.save_button)
        right.addLayout(buttons)
        right.addWidget(self.status)
        right.addWidget(QLabel("Tools"))
        right.addWidget(self.tools, 1)

        body = QHBoxLayout()
        body.addLayout(left)
        body.addLayout(right, 1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.close)
        col = QVBoxLayout(self)
        col.addLayout(body, 1)
        col.addWidget(close)
        self._fill_list()

    # -- list -----------------------------------------------------------------------------
    def _fill_list(self, select: str | None = None) -> None:
        self.list.blockSignals(True)
        self.list.clear()
        for server in self.settings.mcp_servers:
            self.list.addItem(server.name)
        self.list.blockSignals(False)
        names = [s.name for s in self.settings.mcp_servers]
        if select in names:
            self.list.setCurrentRow(names.index(select))
            self._show_row(names.index(select))
        elif names:
            self.list.setCurrentRow(0)
        else:
            self.new_server()

    def _show_row(self, row: int) -> None:
        if 0 <= row < len(self.settings.mcp_servers):
            self._load(self.settings.mcp_servers[row])

    def _load(self, server: McpServerConfig | None) -> None:
        self._editing = server.name if server else None
        self.name.setText(server.name if server else "")
        self.command.setText(server.command if server else "")
        self.url.setText(server.url if server else "")
        self.timeout.setValue(server.timeout_s if server else 30.0)
        self.delete_button.setEnabled(server is not None)
        self.tools.clear()
        self.show_status("")

    def new_server(self) -> None:
        self.list.blockSignals(True)
        self.list.setCurrentRow(-1)
        self.list.blockSignals(False)
        self._load(None)
        self.name.setFocus()

    # -- editing ----------------------------------------------------------------------------
    def form_server(self) -> McpServerConfig:
        """What the form says, validated (McpConfigError says what is wrong)."""
        return McpServerConfig(self.name.text().strip(), self.command.text().strip(),
                               self.url.text().strip(), self.timeout.value())

    def save_current(self) -> bool:
        """Add or update the server in the settings; False (status says why) if not."""
        try:
            server = self.form_server()
        except McpConfigError as exc:
            self.show_status(str(exc), error=True)
            return False
        saved = list(self.settings.mcp_servers)
        if any(s.name == server.name for s in saved if s.name != self._editing):
            self.show_status(f"There is already an MCP server named {server.name!r}.",
                             error=True)
            return False
        index = next((i for i, s in enumerate(saved) if s.name == self._editing), None)
        if index is None:
            saved.append(server)
        else:
            saved[index] = server
        self.settings.set_mcp_servers(saved)
        self._fill_list(select=server.name)
        self.show_status(f"Saved {server.name}. Test lists its tools.")
        return True

    def delete_current(self) -> None:
        if self._editing is None:
            return
        self.settings.set_mcp_servers([s for s in self.settings.mcp_servers
                                       if s.name != self._editing])
        self._fill_list()

    # -- testing --------------------------------------------------------------------------
    def start_test(self) -> asyncio.Future[list[ToolInfo] | None]:
        self.test_task = asyncio.ensure_future(self.test_server())
        return self.test_task

    async def test_server(self) -> list[ToolInfo] | None:
        try:
            server = self.form_server()
        except McpConfigError as exc:
            self.show_status(str(exc), error=True)
            return None
        self.test_button.setEnabled(False)
        self.tools.clear()
        self.show_status(f"Connecting to {server.name} …")
        try:
            tools = await self.ctx.mcp.test(server)
        except McpError as exc:
            self.show_status(str(exc), error=True)
            return None
        finally:
            self.test_button.setEnabled(True)
        for tool in tools:
            item = QTreeWidgetItem([tool.name, tool.description.splitlines()[0]
                                    if tool.description else ""])
            item.setToolTip(1, tool.description)
            self.tools.addTopLevelItem(item)
        self.show_status(f"{server.name} works: {len(tools)} tool"
                         f"{'s' if len(tools) != 1 else ''}.")
        return tools

    def show_status(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setProperty("error", "true" if error else "false")
        self.status.setStyleSheet("color: #c5221f;" if error else "")


def open_mcp_servers(ctx: AppContext, parent: QWidget | None) -> McpServersDialog:
    """One dialog per window: shown again (raised) if it is open already."""
    existing = parent.findChild(McpServersDialog) if parent is not None else None
    dialog = existing or McpServersDialog(ctx, parent)
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog
