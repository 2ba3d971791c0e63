"""API keys of saved connections, kept out of settings.json.

The `keyring` package is not a dependency, so keys go to a separate JSON file in the data
directory with 0600 permissions (readable by the user only). This is not encryption: it
keeps keys out of settings exports, backups of settings.json and screenshots of it, as an
`~/.netrc` or `~/.config/gh/hosts.yml` does.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

KEYS_FILE_NAME = "connection_keys.json"


class KeyFile:
    """name -> API key, read and written whole (a handful of entries)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def read(self) -> dict[str, str]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable key file %s: %s", self.path, exc)
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): v for k, v in data.items() if isinstance(v, str) and v}

    def write(self, keys: dict[str, str]) -> None:
        """Atomically, created 0600 from the start (never briefly world-readable)."""
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({k: v for k, v in keys.items() if v}, f, indent=2)
            os.chmod(tmp, 0o600)  # an older .tmp may have had other bits
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("could not save API keys to %s: %s", self.path, exc)
