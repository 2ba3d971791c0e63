"""The real app as a child process (`python -m tests.ui.tiny_app`), for tests that kill or
signal it: start it on a history file and a data directory of its own, follow its output
lines, and read its history database as another process would."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def read_messages(db: Path) -> list[tuple]:
    """(seq, role, content, is_complete, stats) of every message; [] until it can be read."""
    if not db.exists():
        return []
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return conn.execute("SELECT seq, role, content, is_complete, stats FROM messages "
                                "ORDER BY seq").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return []  # not created or migrated yet


class AppProcess:
    """`lines`: (monotonic time, line) of everything it printed, read on a thread."""

    def __init__(self, db: Path, data_dir: Path, autosend: list[list[Any]],
                 **env: str) -> None:
        full_env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONUNBUFFERED="1",
                        BATCHCHAT_DATA_DIR=str(data_dir),
                        BATCHCHAT_TEST_AUTOSEND=json.dumps(autosend), **env)
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.ui.tiny_app", "--db", str(db)],
                                     cwd=ROOT, env=full_env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.strip()))

    def output(self, last: int | None = None) -> str:
        texts = [x for _, x in self.lines]
        return "\n".join(texts[-last:] if last else texts)

    def wait_until(self, predicate: Any, what: str, timeout: float = 30.0) -> None:
        """Poll `predicate()` while the app runs; fail if it exits or `timeout` passes."""
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.proc.poll() is None, f"the app exited:\n{self.output()}"
            assert time.monotonic() < deadline, f"{what}: not within {timeout} s:\n" + (
                self.output(last=30))
            time.sleep(0.05)

    def finish(self, timeout: float = 5.0) -> None:
        """Kill it if it still runs (a failed test), and wait for its output to end."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=timeout)
