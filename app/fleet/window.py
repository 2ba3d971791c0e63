"""The window's ModelManager (issue #50): the model library's list (with the folders the user
added) as its catalog, and the window's loader, so a model a tab names loads as the default
one does (the same EngineConfig: speculation, the KV kept on disk), except that a draft
model chosen for the default one drafts only for the models sharing its tokenizer."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..backend.local_target import LocalTarget
from ..load_progress import ProgressFn, takes_progress
from ..models.library import list_models
from .catalog import Catalog
from .manager import ModelManager


def window_fleet(folders: Callable[[], Sequence[str]],
                 loader: Callable[[], Callable[..., Any]]) -> ModelManager:
    """A ModelManager over `list_models(folders())`, read at each look-up (a folder added
    later is found), loading with `loader()` (the bridge's, as it is at the load: source ->
    Engine; its progress reported when it takes a `progress=` keyword)."""
    def load(source: str, progress: ProgressFn | None = None) -> LocalTarget:
        load_engine = loader()
        options: dict[str, Any] = {}
        if progress is not None and takes_progress(load_engine):
            options["progress"] = progress
        if _takes(load_engine, "draft_optional"):  # the window's own loader does
            options["draft_optional"] = True
        return LocalTarget(load_engine(source, **options))

    return ModelManager(Catalog(lambda: list_models(folders())), load)


def _takes(loader: Callable[..., Any], keyword: str) -> bool:
    try:
        return keyword in inspect.signature(loader).parameters
    except (TypeError, ValueError):
        return False
