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
    history: HistorySync | None = None  # the saved chats (app.history.sync), once the app saves

    @property
    def store(self) -> SafeStore | None:
        """The history store, to read from (HistorySync is its one writer)."""
        return self.history.store if self.history is not None else None

    def __post_init__(self) -> None:
        # tabs on a remote backend find its connection in the settings, as saved now
        self.bridge.remotes.find = self.settings.connection

    @classmethod
    def create(cls, settings: Settings | None = None,
               bridge: EngineBridge | None = None) -> AppContext:
        return cls(settings or Settings.load(), bridge or EngineBridge())
