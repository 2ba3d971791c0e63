"""Kill a real app process (SIGKILL) while a reply streams: the finished message before it
is intact, and the cut-off reply holds its text up to the last checkpoint (about 1 s)."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

from app.storage import Store
from tests.ui.app_process import AppProcess, read_messages

LAG_LIMIT_S = 2.0  # the bound: at most the last couple of seconds are lost


@pytest.mark.skipif(sys.platform != "linux", reason="uses SIGKILL and the offscreen platform")
def test_sigkill_mid_reply_loses_only_the_last_seconds(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    app = AppProcess(db, tmp_path / "data", [["first question", 20], ["second question", 15000]])
    seen: list[str] = []  # distinct checkpoints of the streaming reply
    finished_row = None

    def streaming_since() -> float | None:
        """When the app first showed the second reply's text (monotonic), or None."""
        texts = [x for _, x in app.lines]
        if "autosend finished 1" not in texts:
            return None
        start = texts.index("autosend finished 1")
        shown = [t for t, x in app.lines[start:] if x.startswith("autosend streamed ")]
        return shown[0] if shown else None

    def ready_to_kill() -> bool:
        """Two checkpoints of the streaming reply seen, and it has streamed for longer than
        the lag limit (killing right at the third checkpoint, ~2 s in, raced that limit)."""
        nonlocal finished_row
        rows = read_messages(db)
        if len(rows) == 4 and rows[3][3] == 0 and rows[3][2] and rows[3][2] not in seen:
            finished_row = rows[1]
            seen.append(rows[3][2])
        since = streaming_since()
        return (len(seen) >= 2 and since is not None
                and time.monotonic() - since > LAG_LIMIT_S + 0.5)

    try:
        app.wait_until(ready_to_kill, "two checkpoints and the lag limit of streaming")
        killed_at = time.monotonic()
        app.proc.send_signal(signal.SIGKILL)
        app.proc.wait(timeout=10)
    finally:
        app.finish()
    lines = app.lines

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
