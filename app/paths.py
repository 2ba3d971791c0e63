"""Where BatchChat keeps its files (Qt-free, so tests and tools can use it)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

APP_DIR_NAME = "batchchat"
DB_FILE_NAME = "history.db"
KV_DIR_NAME = "kv-cache"


def data_dir(env: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """The per-user data directory: $BATCHCHAT_DATA_DIR, else the platform's usual place."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if env.get("BATCHCHAT_DATA_DIR"):
        return Path(env["BATCHCHAT_DATA_DIR"]).expanduser()
    home = Path(env.get("HOME") or Path.home())
    if platform == "darwin":
        return home / "Library" / "Application Support" / "BatchChat"
    if platform.startswith("win"):
        base = env.get("APPDATA")
        return (Path(base) if base else home / "AppData" / "Roaming") / "BatchChat"
    xdg = env.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else home / ".local" / "share") / APP_DIR_NAME


def db_path(
    override: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Path:
    """The history database: the --db flag wins, then $BATCHCHAT_DB, then the data dir."""
    env = os.environ if env is None else env
    if override:
        return Path(override).expanduser()
    if env.get("BATCHCHAT_DB"):
        return Path(env["BATCHCHAT_DB"]).expanduser()
    return data_dir(env) / DB_FILE_NAME


def kv_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where chats' KV is kept across restarts (engine/prefix_store.py)."""
    return data_dir(env) / KV_DIR_NAME
