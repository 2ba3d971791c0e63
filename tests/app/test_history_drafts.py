"""Speculative decoding's figures in the history (issue #31), on a real SQLite file and the
tiny model drafting: a reply's drafted and accepted tokens and decode steps are saved with
its request stats and its message, and a chat restored from the file shows the same stats
line."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.bridge import EngineBridge
from app.conversation import Conversation
from app.history.writer import HistoryWriter
from app.storage import Store
from engine import Engine, EngineConfig
from tests.engine.conftest import drafting_pays

from .history_sync_helpers import FAST, read_back, tiny, wait_until


@pytest.fixture
async def bridge():
    t = tiny()
    b = EngineBridge()
    engine = Engine(t.model, t.tokenizer, eos_token_ids=[], context_length=t.context_length,
                    config=EngineConfig(max_concurrent=4, speculative="ngram"))
    # (its rows draft whatever a drafted position costs on the tiny model)
    await b.use_engine(drafting_pays(engine), "tiny")
    yield b
    await b.shutdown(timeout=2.0)


async def test_a_drafted_reply_keeps_its_figures_across_a_restart(bridge, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    sync = HistoryWriter.open(db)
    conv = Conversation(bridge, system_prompt="", params=FAST | {"max_tokens": 64})
    sync.attach(conv, 0)
    assert conv.send("copy: one two three one two three one two three one two three")
    await wait_until(lambda: not conv.is_busy)
    engine = conv.generations[-1].stream.stats
    assert engine.drafted_tokens > 0  # the tiny model's greedy reply repeats itself
    shown = conv.messages[-1].stats
    assert (shown.drafted_tokens, shown.accepted_tokens, shown.decode_steps) == (
        engine.drafted_tokens, engine.accepted_tokens, engine.decode_steps)
    assert shown.drafts in shown.summary()
    assert shown.drafts.startswith(f"drafts {100 * engine.acceptance:.0f}% accepted · "
                                   f"{engine.tokens_per_step:.1f} tokens per step")

    _, rows = read_back(db, conv.session_id)
    assert (rows[1].stats["drafted_tokens"], rows[1].stats["accepted_tokens"],
            rows[1].stats["decode_steps"]) == (engine.drafted_tokens, engine.accepted_tokens,
                                               engine.decode_steps)
    store = Store.open(db, read_only=True)
    try:
        [saved] = store.list_request_stats(session_id=conv.session_id)
    finally:
        store.close()
    assert (saved.drafted_tokens, saved.accepted_tokens, saved.decode_steps) == (
        engine.drafted_tokens, engine.accepted_tokens, engine.decode_steps)
    sync.detach(conv)
    assert sync.close()

    again = HistoryWriter.open(db)  # as after a restart
    restored = again.load_conversation(conv.session_id, bridge)
    assert restored.messages[-1].stats.summary() == shown.summary()
    again.close()


async def test_a_reply_that_drafted_nothing_says_nothing_of_drafts(tmp_path: Path) -> None:
    t = tiny()
    plain = EngineBridge()
    await plain.use_engine(Engine(t.model, t.tokenizer, eos_token_ids=[],
                                  context_length=t.context_length,
                                  config=EngineConfig(speculative="off")), "tiny")
    try:
        conv = Conversation(plain, system_prompt="", params=FAST)
        assert conv.send("copy: one two three one two three")
        await wait_until(lambda: not conv.is_busy)
        stats = conv.messages[-1].stats
        assert stats.drafted_tokens == 0 and stats.drafts == ""
        assert "drafts" not in stats.summary() and "tokens per step" not in stats.summary()
    finally:
        await plain.shutdown(timeout=2.0)
