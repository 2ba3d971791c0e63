"""The one application context handed to every view (instead of globals)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .bridge import EngineBridge
from .bridge.local_target import default_loader
from .history.reader import HistoryReader
from .history.writer import HistoryWriter
from .mcp import McpManager
from .settings import Settings


@dataclass
class AppContext:
    settings: Settings
    bridge: EngineBridge
    history: HistoryWriter | None = None  # the saved chats (app.history.writer), once the app saves
    mcp: McpManager = field(default_factory=McpManager)  # MCP servers' tools (app.mcp)

    @property
    def history_reader(self) -> HistoryReader | None:
        """The history, to read from: no write methods (HistoryWriter is its one writer)."""
        return self.history.reader if self.history is not None else None

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
