"""The one application context handed to every view (instead of globals)."""

from __future__ import annotations

from dataclasses import dataclass

from .bridge import EngineBridge
from .history.sync import HistorySync
from .settings import Settings
from .storage import SafeStore


@dataclass
class AppContext:
    settings: Settings
    bridge: EngineBridge
    store: SafeStore | None = None  # the history store, once the app saves chats
    history: HistorySync | None = None  # keeps `store` in step with the tabs (app.history.sync)

    def __post_init__(self) -> None:
        # tabs on a remote backend find its connection in the settings, as saved now
        self.bridge.remotes.find = self.settings.connection

    @classmethod
    def create(cls, settings: Settings | None = None,
               bridge: EngineBridge | None = None) -> AppContext:
        return cls(settings or Settings.load(), bridge or EngineBridge())
