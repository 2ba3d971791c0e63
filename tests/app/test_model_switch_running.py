"""app.bridge.switch on a real tiny engine: who runs (chat tabs, the simulator, the API
server; remote replies never), STOP ends them all (a chat reply "switched", its text kept),
FINISH waits for them while new local requests are refused, and cancel keeps the model."""

from __future__ import annotations

import asyncio

import pytest

from app.bridge import SWITCHED, BridgeState, Choice, EngineBridge
from app.request import ChatRequest, Refusal, RefusalCode
from app.request.tab import tab_request
from engine import Engine

from .history_sync_helpers import tiny, wait_until

CHAT = [{"role": "user", "content": "Tell a long story."}]
LONG = {"max_tokens": 300, "temperature": 0.0}


def new_engine() -> Engine:
    t = tiny(2048)
    return Engine(t.model, t.tokenizer, eos_token_ids=[], context_length=t.context_length,
                  description="tiny")


async def bridge_on_tiny() -> EngineBridge:
    bridge = EngineBridge(loader=lambda source: new_engine())
    await bridge.use_engine(new_engine(), "first")
    return bridge


async def test_running_counts_each_source_and_stop_ends_them_all() -> None:
    bridge = await bridge_on_tiny()
    try:
        chat = bridge.submit(tab_request(CHAT, LONG), tag="tab-3")
        sims = [bridge.streams.submit(ChatRequest(messages=CHAT, params=LONG),
                                      tag=f"sim-ab12cd34-{i}").stream for i in range(2)]
        api = bridge.local.submit(CHAT, params=LONG, tag="api")
        await wait_until(lambda: len(chat.tokens) > 2)
        running = bridge.running()
        assert (dict(running.chats), running.simulator, running.server) == ({"tab-3": 1}, 2, 1)
        assert running.describe({"tab-3": "Story"}) == (
            "4 replies are running: 1 in “Story”, 2 from the load simulator and 1 from the "
            "API server.")
        assert running.describe({}).startswith("4 replies are running: 1 in a closed tab")

        assert await bridge.switch("second", Choice.STOP) is True
        await wait_until(lambda: chat.is_finished)
        assert chat.finish_reason == SWITCHED and chat.stats.finish_reason == SWITCHED
        assert 0 < len(chat.tokens) < LONG["max_tokens"]
        assert [s.finish_reason for s in sims] == ["cancelled", "cancelled"]
        assert api.finish_reason == "cancelled"
        assert bridge.source == "second" and bridge.running().total == 0
    finally:
        await bridge.shutdown(timeout=2.0)


async def test_finish_waits_refusing_new_local_requests_then_loads() -> None:
    bridge = await bridge_on_tiny()
    try:
        first = bridge.local
        chat = bridge.submit(tab_request(CHAT, LONG), tag="tab-1")
        await wait_until(lambda: len(chat.tokens) > 2)
        switching = asyncio.ensure_future(bridge.switch("second", Choice.FINISH))
        await wait_until(lambda: bridge.pending_switch is not None and bool(bridge.refusing))
        assert bridge.pending_switch.phase == "waiting"
        assert bridge.serving is None  # the API server answers 503 meanwhile
        with pytest.raises(Refusal, match="Switching to second") as refused:
            bridge.submit(tab_request(CHAT, LONG), tag="tab-2")
        assert refused.value.code == RefusalCode.MODEL_NOT_READY
        assert bridge.local is first and bridge.state == BridgeState.READY
        assert await switching is True
        assert chat.finish_reason == "length" and len(chat.tokens) == LONG["max_tokens"]
        assert bridge.local is not first and not bridge.refusing
        assert bridge.serving is bridge.local
    finally:
        await bridge.shutdown(timeout=2.0)


async def test_cancel_while_waiting_keeps_the_model_and_a_second_switch_is_refused() -> None:
    bridge = await bridge_on_tiny()
    try:
        first = bridge.local
        chat = bridge.submit(tab_request(CHAT, LONG), tag="tab-1")
        await wait_until(lambda: len(chat.tokens) > 2)
        switching = asyncio.ensure_future(bridge.switch("second"))
        await wait_until(lambda: bridge.pending_switch is not None)
        assert await bridge.switch("third") is False  # one switch at a time
        assert bridge.switcher.cancel() is True
        assert await switching is False
        assert bridge.local is first and bridge.source == "first" and not bridge.refusing
        assert bridge.pending_switch is None
        await wait_until(lambda: chat.is_finished)
        assert chat.finish_reason == "length"
    finally:
        await bridge.shutdown(timeout=2.0)
