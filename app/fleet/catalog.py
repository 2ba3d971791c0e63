"""The models a manager loads by name: library entries (one folder's, or the whole
library's), and any .gguf file or model folder named by its path."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..models.entry import ModelEntry
from ..models.inspect import describe
from ..models.names import aliases_of
from ..models.places import FOLDER
from .errors import UnknownModel


class Catalog:
    """`entries()` is read at each look-up (a file added to the folder is found)."""

    def __init__(self, entries: Callable[[], Sequence[ModelEntry]]) -> None:
        self._entries = entries

    def available(self) -> list[ModelEntry]:
        """The entries that load on this backend."""
        return [e for e in self._entries() if e.loads]

    def find(self, name: str) -> ModelEntry:
        """The entry `name` means: its name or source, or one of the names a client knows it
        by (file name with or without .gguf, repo id; case does not matter), else a .gguf
        file or model folder at that path. UnknownModel otherwise, and for a model that
        does not load here."""
        entries = self.available()
        for entry in entries:
            if name in (entry.name, entry.source):
                return entry
        wanted = name.casefold()
        for entry in entries:
            if any(wanted == alias.casefold() for alias in aliases(entry)):
                return entry
        path = Path(name).expanduser()
        if path.suffix.lower() == ".gguf" and path.is_file() or (path / "config.json").is_file():
            entry = describe(path, name=str(path), place=FOLDER)
            if entry.loads:
                return entry
        raise UnknownModel(name, [e.name for e in entries])


def aliases(entry: ModelEntry) -> tuple[str, ...]:
    """The names besides `entry.name` a client may send for it (app/server/model_names.py)."""
    return (entry.name, *aliases_of(entry.source))
