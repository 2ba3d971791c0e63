"""The context overflow policy's figures in the history (issue #53, item 4), on a real
SQLite file: a reply whose prompt left messages out keeps `N tokens dropped (M messages)`
on its stats line after a restart."""

from __future__ import annotations

from pathlib import Path

from app.bridge import EngineBridge
from app.conversation import Conversation
from app.history.writer import HistoryWriter
from engine import Engine

from .history_sync_helpers import FAST, read_back, tiny, wait_until


async def test_a_reply_keeps_what_was_dropped_across_a_restart(tmp_path: Path) -> None:
    t = tiny()
    bridge = EngineBridge()
    await bridge.use_engine(Engine(t.model, t.tokenizer, eos_token_ids=[],
                                   context_length=512), "tiny")
    try:
        db = tmp_path / "h.db"
        sync = HistoryWriter.open(db)
        conv = Conversation(bridge, system_prompt="Be brief.",
                            params=FAST | {"max_tokens": 12,
                                           "context_overflow": "rolling_window"})
        sync.attach(conv, 0)
        for i in range(16):
            assert conv.send(f"Turn {i}: tell me one more thing about rivers, please.")
            await wait_until(lambda: not conv.is_busy)
        shown = conv.messages[-1].stats
        assert shown.dropped_tokens > 0 and shown.dropped_messages >= 2
        assert f"{shown.dropped_tokens} tokens dropped ({shown.dropped_messages} messages)" \
            in shown.summary()
        assert conv.messages[1].stats.dropped_tokens == 0  # the first prompt fit
        _, rows = read_back(db, conv.session_id)
        assert rows[-1].stats["dropped_tokens"] == shown.dropped_tokens
        sync.detach(conv)
        assert sync.close()

        again = HistoryWriter.open(db)  # as after a restart
        restored = again.load_conversation(conv.session_id, bridge)
        assert restored.messages[-1].stats.summary() == shown.summary()
        again.close()
    finally:
        await bridge.shutdown(timeout=2.0)
