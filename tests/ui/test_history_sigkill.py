"""Kill a real app process (SIGKILL) while a reply streams: the finished message before it
is intact, and the cut-off reply holds its text up to the last checkpoint (about 1 s)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.storage import Store

ROOT = Path(__file__).resolve().parents[2]
LAG_LIMIT_S = 2.0  # the bound: at most the last couple of seconds are lost


def read_messages(db: Path) -> list[tuple]:
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


@pytest.mark.skipif(sys.platform != "linux", reason="uses SIGKILL and the offscreen platform")
def test_sigkill_mid_reply_loses_only_the_last_seconds(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONUNBUFFERED="1",
               BATCHCHAT_DATA_DIR=str(tmp_path / "data"),
               BATCHCHAT_TEST_AUTOSEND=json.dumps([["first question", 20],
                                                   ["second question", 15000]]))
    proc = subprocess.Popen([sys.executable, "-m", "tests.ui.tiny_app", "--db", str(db)],
                            cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: [lines.append((time.monotonic(), line.strip()))
                                              for line in proc.stdout], daemon=True)
    reader.start()
    seen: list[str] = []  # distinct checkpoints of the streaming reply
    finished_row = None
    try:
        deadline = time.monotonic() + 30
        while len(seen) < 3:
            assert proc.poll() is None, "the app exited:\n" + "\n".join(x for _, x in lines)
            assert time.monotonic() < deadline, "no checkpoints within 30 s:\n" + "\n".join(
                x for _, x in lines[-30:])
            rows = read_messages(db)
            if len(rows) == 4 and rows[3][3] == 0 and rows[3][2] and rows[3][2] not in seen:
                finished_row = rows[1]
                seen.append(rows[3][2])
            time.sleep(0.05)
        killed_at = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=5)

    store = Store.open(db)  # opens (and recovers the WAL) after the kill
    try:
        [session] = store.list_sessions(open_only=True)
        messages = store.list_messages(session.id)
    finally:
        store.close()
    assert [(m.role, m.is_complete) for m in messages] == [
        ("user", True), ("assistant", True), ("user", True), ("assistant", False)]
    first, partial = messages[1], messages[3]
    # The finished reply is intact: what was there before the kill, with its stats.
    assert (first.seq, first.role, first.content, True) == finished_row[:4]
    assert first.stats["finish_reason"] == "length" and first.stats["generated_tokens"] == 20
    # The cut-off reply: every checkpoint seen is a prefix of what survived ...
    assert all(partial.content.startswith(text) for text in seen)
    # ... and it holds what the app showed LAG_LIMIT_S before the kill.
    second = [i for i, (_, x) in enumerate(lines) if x == "autosend finished 1"][0]
    shown = [(t, int(x.split()[-1])) for t, x in lines[second:]
             if x.startswith("autosend streamed ")]
    earlier = [n for t, n in shown if t <= killed_at - LAG_LIMIT_S]
    assert earlier, "the reply streamed for less than the lag limit"
    assert len(partial.content) >= earlier[-1] > 0
