"""The one application context handed to every view (instead of globals)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .bridge import EngineBridge
from .bridge.local_target import default_loader
from .history.entries import HistoryRecords
from .history.reader import HistoryReader
from .mcp import McpManager
from .settings import Settings


@dataclass
class AppContext:
    settings: Settings
    bridge: EngineBridge
    # the history, once the app saves one: read through `history_reader` (no writes), and
    # records handed in through `records`; the writer itself only the Workspace holds
    history_reader: HistoryReader | None = None
    records: HistoryRecords | None = None
    mcp: McpManager = field(default_factory=McpManager)  # MCP servers' tools (app.mcp)

    def __post_init__(self) -> None:
        # tabs on a remote backend find its connection in the settings, as saved now
        self.bridge.remotes.find = self.settings.connection
        # the manager follows the saved MCP servers
        self.mcp.set_servers(self.settings.mcp_servers)
        self.settings.mcp_servers_changed.connect(
            lambda: self.mcp.set_servers(self.settings.mcp_servers))

    @classmethod
    def create(cls, settings: Settings | None = None,
               bridge: EngineBridge | None = None) -> AppContext:
        settings = settings or Settings.load()
        if bridge is None:  # the local engine speculates as the settings say at each load
            bridge = EngineBridge(default_loader(speculative=lambda: settings.speculative))
        return cls(settings, bridge)
