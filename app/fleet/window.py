"""The window's ModelManager (issue #50): the model library's list (with the folders the user
added) as its catalog, and the window's loader, so a model a tab names loads as the default
one does (the same EngineConfig: speculation, the KV kept on disk)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..models.library import list_models
from .catalog import Catalog
from .manager import ModelManager

if TYPE_CHECKING:
    from ..bridge.local_target import LocalTarget


def window_fleet(folders: Callable[[], Sequence[str]],
                 loader: Callable[[str], Any]) -> ModelManager:
    """A ModelManager over `list_models(folders())`, read at each look-up (a folder added
    later is found), loading with `loader` (the bridge's: source -> Engine)."""
    def load(source: str) -> LocalTarget:
        from ..bridge.local_target import LocalTarget

        return LocalTarget(loader(source))

    return ModelManager(Catalog(lambda: list_models(folders())), load)
