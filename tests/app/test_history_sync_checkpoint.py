"""A streaming reply is in the database at its first token and checkpointed while it
streams, visible to a second connection, never more than a checkpoint period behind."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from app.conversation import Conversation
from app.history.writer import HistoryWriter

from .history_sync_helpers import FAST, read_back, start_bridge, wait_until

CHECKPOINT_S = 0.3
SLACK_S = 0.6  # a loaded CI machine may run the timer late


async def test_streaming_reply_is_checkpointed_for_other_readers(tmp_path: Path) -> None:
    bridge = await start_bridge(context_length=16384)
    db = tmp_path / "h.db"
    sync = HistoryWriter.open(db, checkpoint_s=CHECKPOINT_S)
    conv = Conversation(bridge, params=FAST | {"max_tokens": 16000})
    sync.attach(conv, 0)
    try:
        conv.send("stream for a while")
        reply = conv.messages[1]
        shown: list[tuple[float, int]] = []  # (time, characters shown then)
        seen: list[str] = []
        deadline = time.monotonic() + 3.0
        # Ends once a few checkpoints were seen: a fast machine streams the tiny model's
        # whole reply in a couple of seconds.
        while time.monotonic() < deadline and conv.is_busy and len(seen) < 5:
            shown.append((time.monotonic(), len(reply.content)))
            _session, rows = read_back(db, conv.session_id)
            now = time.monotonic()
            if len(rows) == 2:
                row = rows[1]
                assert not row.is_complete and row.role == "assistant"
                assert reply.content.startswith(row.content)
                # Whatever was shown a checkpoint period (plus slack) ago is saved.
                older = [n for t, n in shown if t <= now - CHECKPOINT_S - SLACK_S]
                assert len(row.content) >= (older[-1] if older else 0)
                if not seen or seen[-1] != row.content:
                    seen.append(row.content)
            await asyncio.sleep(0.05)
        assert conv.is_busy, ("the reply ended too soon to test checkpoints",
                              len(reply.content), reply.stats)
        assert len(seen) >= 3 and len(seen[-1]) > len(seen[0])
        conv.stop()
        await wait_until(lambda: not conv.is_busy)
        _session, rows = read_back(db, conv.session_id)
        assert rows[1].is_complete and rows[1].content == reply.content
        assert rows[1].stats["finish_reason"] == "cancelled"
    finally:
        sync.close()
        await bridge.shutdown(timeout=2.0)
