"""Conversation memory in the history, on a real SQLite file and the tiny model: each reply's
token ids and each request's cached tokens are saved, and a chat restored from the file hands
the engine the same ids (so its KV is still reused)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.conversation import Conversation
from app.history.writer import HistoryWriter
from app.storage import Store

from .history_sync_helpers import FAST, read_back, start_bridge, wait_until


@pytest.fixture
async def bridge():
    b = await start_bridge()
    yield b
    await b.shutdown(timeout=2.0)


async def chat(conv: Conversation, *texts: str) -> None:
    for text in texts:
        assert conv.send(text)
        await wait_until(lambda: not conv.is_busy)


async def test_replies_token_ids_and_cached_tokens_are_saved(bridge, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    sync = HistoryWriter.open(db)
    conv = Conversation(bridge, system_prompt="Be brief.", params=FAST)
    sync.attach(conv, 0)
    gens = []
    for text in ("hello", "and again"):
        await chat(conv, text)
        gens.append(conv.generations[-1])
    _, rows = read_back(db, conv.session_id)
    assert [r.token_ids for r in rows] == [None, gens[0].stream.tokens,
                                           None, gens[1].stream.tokens]
    assert len(rows[1].token_ids) == FAST["max_tokens"]
    store = Store.open(db, read_only=True)
    try:
        saved = store.list_request_stats(session_id=conv.session_id)
    finally:
        store.close()
    engine_cached = [g.stream.stats.cached_tokens for g in gens]
    assert [s.cached_tokens for s in saved] == engine_cached
    assert engine_cached[1] > 0  # the second turn reused the first one's KV
    assert rows[3].stats["cached_tokens"] == engine_cached[1]
    sync.close()


async def test_a_restored_chat_sends_the_same_ids_and_reuses_the_kv(bridge,
                                                                     tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    sync = HistoryWriter.open(db)
    conv = Conversation(bridge, system_prompt="Be brief.", params=FAST)
    sync.attach(conv, 0)
    await chat(conv, "hello", "and again")
    before = conv.prompt_messages()
    last = conv.generations[-1].stream.stats
    sync.detach(conv)
    assert sync.close()

    again = HistoryWriter.open(db)  # as after a restart (the engine here still holds the KV)
    restored = again.load_conversation(conv.session_id, bridge)
    again.attach(restored, 0)
    assert restored.prompt_messages() == before
    assert [m.token_ids for m in restored.messages] == [m.token_ids for m in conv.messages]
    await chat(restored, "third")
    cached = restored.generations[-1].stream.stats.cached_tokens
    # Everything up to the last reply came from cache: its prompt and the ids it generated
    # (all but the last, which had not been through the model yet).
    assert cached >= last.prompt_tokens + last.generated_tokens - 1
    again.close()


async def test_regenerate_and_edit_leave_no_stale_ids(bridge, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    sync = HistoryWriter.open(db)
    conv = Conversation(bridge, params=FAST | {"temperature": 1.0})
    sync.attach(conv, 0)
    await chat(conv, "one", "two")
    assert conv.regenerate()
    await wait_until(lambda: not conv.is_busy)
    assert conv.edit_and_resend(0, "one, edited")
    await wait_until(lambda: not conv.is_busy)
    _, rows = read_back(db, conv.session_id)
    assert [(r.id, r.content, r.token_ids) for r in rows] == [
        (m.id, m.content, m.token_ids) for m in conv.tree.nodes.values()]
    assert rows[-1].token_ids == conv.generations[-1].stream.tokens
    assert rows[-1].id == conv.messages[1].id
    sync.close()


async def test_a_long_chat_keeps_only_its_newest_replys_generation(bridge) -> None:
    """Each turn's prompt holds the whole conversation so far, and its Generation the
    prompt's ids, text and tokens; kept for every turn, a chat's memory grew with the
    square of its turns. Only the newest reply's Generation stays; the messages keep each
    reply's text, token ids and stats."""
    conv = Conversation(bridge, params=FAST)
    gens = []
    for text in ("one", "two", "three"):
        await chat(conv, text)
        gens.append(conv.generations[-1])
    assert conv.generations == [gens[2]]
    assert len(gens[2].stream.prompt_tokens) == gens[2].stats.prompt_tokens
    replies = conv.messages[1::2]
    assert [m.token_ids for m in replies] == [g.tokens for g in gens]
    assert [m.content for m in replies] == [g.text for g in gens]
    prompts = [m.stats.prompt_tokens for m in replies]
    assert prompts[0] > 0 and prompts[0] < prompts[1] < prompts[2]
    assert all(len(m.token_ids) == FAST["max_tokens"] for m in replies)
