"""Open chats' KV goes to disk when idle and at quit; a restarted engine reuses it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.bridge import EngineBridge
from app.conversation import Conversation
from app.kv_saver import KVSaver
from engine import Engine, EngineConfig
from tests.engine.conftest import reference_tokens

from .history_sync_helpers import FAST, tiny, wait_until


async def bridge_on(kv_dir: Path) -> EngineBridge:
    t = tiny()
    bridge = EngineBridge()
    await bridge.use_engine(Engine(t.model, t.tokenizer, eos_token_ids=[],
                                   context_length=t.context_length,
                                   config=EngineConfig(kv_disk_dir=str(kv_dir))), "tiny")
    return bridge


@pytest.fixture
async def bridge(tmp_path):
    b = await bridge_on(tmp_path / "kv")
    yield b
    await b.shutdown(timeout=2.0)


async def chat(conv: Conversation, text: str) -> None:
    assert conv.send(text)
    await wait_until(lambda: not conv.is_busy)


async def test_an_idle_chat_is_saved_once_it_has_been_idle(bridge, tmp_path):
    saver = KVSaver(bridge, idle_s=0.2)
    conv = Conversation(bridge, system_prompt="Be brief.", params=FAST)
    saver.watch(conv)
    await chat(conv, "hello")
    assert not list((tmp_path / "kv").glob("*.safetensors"))  # not yet: still within idle_s
    await wait_until(lambda: saver.num_saved == 1, timeout=5)
    assert len(list((tmp_path / "kv").glob("*.safetensors"))) == 1


async def test_a_new_turn_restarts_the_idle_time_and_a_closed_tab_is_not_saved(bridge):
    saver = KVSaver(bridge, idle_s=0.4)
    conv, closed = Conversation(bridge, params=FAST), Conversation(bridge, params=FAST)
    saver.watch(conv)
    saver.watch(closed)
    await chat(conv, "one")
    await chat(closed, "bye")
    saver.forget(closed)  # its tab closed
    await asyncio.sleep(0.2)
    await chat(conv, "two")  # within the idle time: the save waits again
    await asyncio.sleep(0.25)
    assert saver.num_saved == 0
    await wait_until(lambda: saver.num_saved == 1, timeout=5)
    await asyncio.sleep(0.5)
    assert saver.num_saved == 1


async def test_saved_at_quit_and_reused_after_a_restart(tmp_path):
    kv = tmp_path / "kv"
    first = await bridge_on(kv)
    saver = KVSaver(first)
    convs = [Conversation(first, system_prompt="Be brief.", params=FAST) for _ in range(2)]
    for i, conv in enumerate(convs):
        await chat(conv, f"question {i}")
    assert await saver.save_all(convs) == 2
    await first.shutdown(timeout=2.0)
    assert len(list(kv.glob("*.safetensors"))) == 2

    second = await bridge_on(kv)  # a restart: an empty memory cache, the same files
    try:
        conv = Conversation(second, system_prompt="Be brief.", params=FAST,
                            messages=convs[1].messages)
        await chat(conv, "and a follow-up")
        gen = conv.generations[-1]
        stats = gen.stream.stats
        earlier = convs[1].generations[-1].stream
        assert stats.cached_tokens == len(earlier.prompt_tokens) + len(earlier.tokens) - 1
        assert second.local.engine.stats().prefix_disk_loads == 1
        assert gen.tokens == reference_tokens(tiny().model, gen.stream.prompt_tokens, 12)
    finally:
        await second.shutdown(timeout=2.0)


async def test_the_kv_saved_is_the_shown_path_of_a_chat_with_versions(tmp_path):
    """Three answers at once (different seeds), the second shown (neither the one shown
    first nor the newest): its path's KV is what is saved, so after a restart its next
    turn is served from disk up to its last token."""
    kv = tmp_path / "kv"
    first = await bridge_on(kv)
    saver = KVSaver(first)
    conv = Conversation(first, system_prompt="Be brief.", params=FAST | {
        "temperature": 1.0, "seed": 5})
    assert conv.send("question", n=3)
    await wait_until(lambda: not conv.is_busy)
    one, two, three = conv.tree.siblings(conv.messages[1])
    assert len({tuple(m.token_ids) for m in (one, two, three)}) == 3
    assert conv.messages[1] is one and conv.switch_version(1, 1) and conv.messages[1] is two
    earlier = next(g.stream for g in conv.generations if g.request_id == two.request_id)
    assert await saver.save_all([conv]) == 1
    await first.shutdown(timeout=2.0)

    second = await bridge_on(kv)
    try:
        again = Conversation(second, system_prompt="Be brief.", params=FAST, tree=conv.tree)
        await chat(again, "and a follow-up")
        stats = again.generations[-1].stream.stats
        assert stats.cached_tokens == len(earlier.prompt_tokens) + len(earlier.tokens) - 1
        assert second.local.engine.stats().prefix_disk_loads == 1
    finally:
        await second.shutdown(timeout=2.0)
