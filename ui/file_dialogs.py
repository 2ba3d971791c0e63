"""Where file dialogs open: the folder the last one ended in, remembered across restarts
(`Settings.last_folder`), else the home folder."""

from __future__ import annotations

from pathlib import Path

from app.settings import Settings

_settings: Settings | None = None


def use(settings: Settings) -> None:
    """The window's settings (set once when the window is built)."""
    global _settings
    _settings = settings


def start_path(name: str = "") -> str:
    """The last folder (if it still exists) or home, with `name` as the suggested file."""
    folder = Path(_settings.last_folder) if _settings and _settings.last_folder else None
    if folder is None or not folder.is_dir():
        folder = Path.home()
    return str(folder / name) if name else str(folder)


def remember(path: str) -> None:
    """A dialog returned `path` (a file or a folder; empty when cancelled)."""
    if not path or _settings is None:
        return
    chosen = Path(path)
    folder = chosen if chosen.is_dir() else chosen.parent
    if str(folder) != _settings.last_folder:
        _settings.last_folder = str(folder)
        _settings.save()
