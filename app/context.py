"""The one application context handed to every view (instead of globals)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from .backend.local_target import default_loader
from .bridge import EngineBridge
from .fleet import ModelManager
from .fleet.window import window_fleet
from .history.entries import ApiResponses, HistoryRecords
from .history.reader import HistoryReader
from .images.fetch import allow_image_urls
from .mcp import McpManager
from .server.embeddings.retrieval import use_for_retrieval
from .settings import Settings

log = logging.getLogger(__name__)


@dataclass
class AppContext:
    settings: Settings
    bridge: EngineBridge
    # the history, once the app saves one: read through `history_reader` (no writes), and
    # records handed in through `records`; the writer itself only the Workspace holds
    history_reader: HistoryReader | None = None
    records: HistoryRecords | None = None
    # the API server's stored responses (/v1/responses), kept in the history (#53)
    api_responses: ApiResponses | None = None
    mcp: McpManager = field(default_factory=McpManager)  # MCP servers' tools (app.mcp)
    # the library's models tabs may name beside the default one (issue #50); the bridge
    # routes to it and closes it at shutdown
    fleet: ModelManager | None = None

    def __post_init__(self) -> None:
        if self.fleet is None:
            self.fleet = self.bridge.fleet or window_fleet(
                lambda: self.settings.model_folders, lambda: self.bridge.loader)
        self.bridge.fleet = self.fleet
        # tabs on a remote backend find its connection in the settings, as saved now
        self.bridge.remotes.find = self.settings.connection
        # the manager follows the saved MCP servers
        self.mcp.set_servers(self.settings.mcp_servers)
        self.settings.mcp_servers_changed.connect(
            lambda: self.mcp.set_servers(self.settings.mcp_servers))
        # attachment retrieval's embedding model, beside BM25 (#51), now and as changed
        self.use_retrieval_model()
        self.settings.retrieval_model_changed.connect(self.use_retrieval_model)
        # the API server fetches http(s) image URLs only when the user turned it on (#52)
        self.use_image_url_setting()
        self.settings.allow_image_urls_changed.connect(self.use_image_url_setting)

    def use_image_url_setting(self) -> None:
        allow_image_urls(self.settings.allow_image_urls)

    def use_retrieval_model(self) -> None:
        """Retrieval embeds with the model the settings name from now on; one that is not
        a local file (moved, deleted): BM25 alone, and the log says why."""
        try:
            use_for_retrieval(self.settings.retrieval_model or None)
        except ValueError as exc:
            use_for_retrieval(None)
            log.warning("retrieval_model in the settings is not used: %s", exc)

    @classmethod
    def create(cls, settings: Settings | None = None,
               bridge: EngineBridge | None = None) -> AppContext:
        settings = settings or Settings.load()
        if bridge is None:  # the local engine speculates and keeps its KV as the settings say
            bridge = EngineBridge(default_loader(speculative=lambda: settings.speculative,
                                                 kv_bits=lambda: settings.kv_bits))
        return cls(settings, bridge)
