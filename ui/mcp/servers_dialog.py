"""Chat → MCP servers…: add, edit, remove and test MCP servers (a stdio command line or a
streamable-HTTP URL) and see their tools. Saved to the settings at once; testing runs on the
app's asyncio loop (the dialog stays responsive while a server starts)."""

from __future__ import annotations

import asyncio

from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.context import AppContext
from app.mcp import McpConfigError, McpError, McpServerConfig, ToolInfo

from ..named_list_dialog import NamedListDialog, show_once
from ..widgets import double_box


class McpServersDialog(NamedListDialog[McpServerConfig]):
    """Non-modal (`show()`). `test_task` is the running test (tests await it)."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("MCP servers")
        self.setObjectName("mcpServersDialog")
        self.resize(760, 460)
        self.ctx = ctx
        self.settings = ctx.settings
        self.test_task: asyncio.Future[list[ToolInfo] | None] | None = None
        # the tools each server listed when last tested, by what it runs (command, URL):
        # shown again after Save or a pick in the list, instead of an empty list
        self.known_tools: dict[tuple[str, str], list[ToolInfo]] = {}
        left = self._list_panel("mcpServerList", 180, "Remove")

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
        self.tools = QTreeWidget()
        self.tools.setObjectName("mcpTools")
        self.tools.setHeaderLabels(["Tool", "Description"])
        self.tools.setRootIsDecorated(False)
        self.tools.setColumnWidth(0, 160)
        self.test_button = QPushButton("Test")
        self.test_button.setToolTip("Start or connect to the server and list its tools")
        self.test_button.clicked.connect(lambda: self.start_test())
        right = QVBoxLayout()
        right.addLayout(form)
        buttons = QHBoxLayout()
        buttons.addWidget(self.test_button)
        buttons.addStretch(1)
        buttons.addWidget(self._save_button("Save server"))
        right.addLayout(buttons)
        right.addWidget(self._status_label("mcpStatus"))
        right.addWidget(QLabel("Tools"))
        right.addWidget(self.tools, 1)
        self._finish(left, right)

    # -- list -----------------------------------------------------------------------------
    def _items(self) -> list[McpServerConfig]:
        return self.settings.mcp_servers

    def _store(self, items: list[McpServerConfig]) -> None:
        self.settings.set_mcp_servers(items)

    def _load(self, server: McpServerConfig | None) -> None:
        self._editing = server.name if server else None
        self.name.setText(server.name if server else "")
        self.command.setText(server.command if server else "")
        self.url.setText(server.url if server else "")
        self.timeout.setValue(server.timeout_s if server else 30.0)
        self.delete_button.setEnabled(server is not None)
        known = self.known_tools.get((server.command, server.url)) if server else None
        self._show_tools(known or [])
        self.show_status("")

    def _new_item(self) -> None:
        self._start_new(self.name)

    new_server = _new_item

    # -- editing ----------------------------------------------------------------------------
    def form_server(self) -> McpServerConfig:
        """What the form says, validated (McpConfigError says what is wrong)."""
        return McpServerConfig(self.name.text().strip(), self.command.text().strip(),
                               self.url.text().strip(), self.timeout.value())

    def save_current(self) -> bool:
        """Add or update the server in the settings; False (status says why) if not."""
        server = self._checked_form(self.form_server, McpConfigError)
        if server is None:
            return False
        if not self._save_item(server, f"There is already an MCP server named {server.name!r}."):
            return False
        known = self.known_tools.get((server.command, server.url))
        self.show_status(f"Saved {server.name}." if known is not None
                         else f"Saved {server.name}. Test lists its tools.")
        return True

    # -- testing --------------------------------------------------------------------------
    def start_test(self) -> asyncio.Future[list[ToolInfo] | None]:
        self.test_task = asyncio.ensure_future(self.test_server())
        return self.test_task

    async def test_server(self) -> list[ToolInfo] | None:
        server = self._checked_form(self.form_server, McpConfigError)
        if server is None:
            return None
        self.tools.clear()
        self.show_status(f"Connecting to {server.name} …")
        tools = await self._with_button_off(self.test_button, self.ctx.mcp.test(server), McpError)
        if tools is None:
            return None
        self.known_tools[(server.command, server.url)] = list(tools)
        self._show_tools(tools)
        self.show_status(f"{server.name} works: {len(tools)} tool"
                         f"{'s' if len(tools) != 1 else ''}.")
        return tools

    def _show_tools(self, tools: list[ToolInfo]) -> None:
        self.tools.clear()
        for tool in tools:
            item = QTreeWidgetItem([tool.name, tool.description.splitlines()[0]
                                    if tool.description else ""])
            item.setToolTip(1, tool.description)
            self.tools.addTopLevelItem(item)


def open_mcp_servers(ctx: AppContext, parent: QWidget | None) -> McpServersDialog:
    """One dialog per window: shown again (raised) if it is open already."""
    return show_once(parent, McpServersDialog, lambda: McpServersDialog(ctx, parent))
