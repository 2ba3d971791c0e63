"""Issue #49: a reasoning model's thinking is checkpointed to the history while it streams,
on the same debounce as the answer's text, so a kill during a long thought keeps the
thought (before, it was saved only when the reply ended).

A real SQLite file read by a second connection (what a crash leaves), and a real process
killed with SIGKILL right after a checkpoint."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from app.bridge import EngineBridge
from app.conversation import Conversation
from app.history.writer import HistoryWriter
from app.storage import Store
from engine import Engine, EngineConfig
from tests.engine.conftest import skip_without_native
from tests.reasoning_model import QWEN3, thinking_tiny

from .history_sync_helpers import FAST, read_back, wait_until

CHECKPOINT_S = 0.3
BUDGET = 3000  # a thought long enough to outlast a few checkpoints


@pytest.fixture(scope="module")
def qwen():
    skip_without_native()
    return thinking_tiny(seed=7, template=QWEN3, context_length=4096)


async def test_the_thinking_is_checkpointed_while_it_streams(tmp_path: Path, qwen) -> None:
    bridge = EngineBridge()
    await bridge.use_engine(Engine(qwen.model, qwen.tokenizer,
                                   eos_token_ids=sorted(qwen.eos_token_ids),
                                   context_length=qwen.context_length,
                                   config=EngineConfig(max_concurrent=2)), "tiny")
    db = tmp_path / "h.db"
    sync = HistoryWriter.open(db, checkpoint_s=CHECKPOINT_S)
    conv = Conversation(bridge, params=FAST | {"max_tokens": BUDGET + 40,
                                               "reasoning": {"budget": BUDGET}})
    sync.attach(conv, 0)
    try:
        conv.send("Think it over.")
        reply = conv.messages[1]
        saved: list[str] = []  # the thinking as a second connection reads it
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline and len(saved) < 3:
            _session, rows = read_back(db, conv.session_id)
            if len(rows) == 2 and rows[1].reasoning and (not saved
                                                         or rows[1].reasoning != saved[-1]):
                row = rows[1]
                assert not row.is_complete and row.content == ""  # still thinking
                assert reply.reasoning.startswith(row.reasoning)
                saved.append(row.reasoning)
            await asyncio.sleep(0.05)
        assert reply.streaming and not reply.content, "the thought ended too soon to test"
        assert len(saved) >= 3 and len(saved[-1]) > len(saved[0])
        conv.stop()
        await wait_until(lambda: not conv.is_busy)
        _session, rows = read_back(db, conv.session_id)
        assert rows[1].is_complete and rows[1].reasoning == reply.reasoning
    finally:
        sync.close()
        await bridge.shutdown(timeout=2.0)


def test_sigkill_while_thinking_keeps_the_last_checkpointed_thought(tmp_path: Path) -> None:
    db_file = tmp_path / "h.db"
    script = textwrap.dedent(f"""
        import os, signal
        from app.storage import Message, Session, Store
        s = Store.open({str(db_file)!r})
        s.save_session(Session(id="S", title="killed while thinking"))
        s.save_message(Message(session_id="S", seq=0, role="user", content="question"))
        s.save_message(Message(id="R", session_id="S", seq=1, role="assistant",
                               is_complete=False))
        s.checkpoint_message("R", "", "a long thought so far")
        s.checkpoint_message("R", "", None)  # an answer-only checkpoint keeps the thought
        s.db.conn.execute("BEGIN")  # a write in flight when the kill lands
        s.db.conn.execute("UPDATE messages SET reasoning = 'never committed' WHERE id = 'R'")
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", script], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == -signal.SIGKILL
    store = Store.open(db_file)
    try:
        [_question, reply] = store.load_session("S").messages
        assert (reply.reasoning, reply.content, reply.is_complete) == (
            "a long thought so far", "", False)
    finally:
        store.close()
