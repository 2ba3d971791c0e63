"""RemoteStream against a real `mlx_lm.server` on loopback: the same greedy text as the
local engine on the same weights, with client-side stats and the server's token counts."""

from __future__ import annotations

import asyncio

import pytest

from app.remote import Connection, RemoteClient, list_models
from app.request.tab import tab_request
from engine import Engine, EngineConfig
from tests.remote.conftest import MODEL

CHATS = [
    [{"role": "user", "content": "the cat sat on"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why is the sky"},
     {"role": "assistant", "content": "blue?"}, {"role": "user", "content": "Tell me more"}],
]


@pytest.fixture
async def engine(mlx_server):
    tiny = mlx_server.tiny
    eng = Engine(tiny.model, tiny.tokenizer, eos_token_ids=list(tiny.eos_token_ids),
                 context_length=tiny.context_length, config=EngineConfig(max_concurrent=4))
    await eng.start()
    yield eng
    await eng.shutdown()


async def test_the_served_model_is_listed(mlx_server):
    models = await list_models(Connection(mlx_server.url))
    assert len(models) == 1 and models[0].endswith("/model")  # the exported directory


@pytest.mark.parametrize("chat", range(len(CHATS)))
async def test_greedy_text_equals_the_local_engines(mlx_server, engine, chat):
    params = {"temperature": 0.0, "max_tokens": 12}
    local = engine.submit(CHATS[chat], params=params)
    expected = await local.result()
    client = RemoteClient(Connection(mlx_server.url, model=MODEL))
    try:
        remote = client.submit(CHATS[chat], params=params)
        events = [e async for e in remote]
    finally:
        await client.close()
    assert remote.error is None and remote.finish_reason == local.finish_reason
    assert remote.text == expected and expected
    assert "".join(e.text for e in events) == expected
    s, ls = remote.stats, local.stats
    # The server's usage chunk: the same prompt as the engine's, and the same tokens out
    # (mlx_lm.server counts an end token the engine does not show).
    assert s.prompt_tokens == ls.prompt_tokens == len(local.prompt_tokens)
    assert s.generated_tokens - (s.finish_reason == "stop") == ls.generated_tokens
    assert s.ttft_s is not None and 0 < s.ttft_s <= s.e2e_s and s.queue_s == 0.0
    assert remote.tokens == [] and all(e.token == -1 for e in events[:-1])


async def test_a_conversation_continues_on_a_server_through_the_bridges_generation(
        mlx_server, engine):
    """A chat begun on the local engine (its reply carries token ids) goes on remotely
    through the bridge, as a tab's does: the ids stay home, the bridge's per-frame
    Generation takes the remote stream as it is."""
    from app.bridge import EngineBridge, ReplyStats
    from app.conversation import ChatMessage, Conversation

    params = {"temperature": 0.0, "max_tokens": 8}
    first = engine.submit(CHATS[0], params=params)
    await first.result()
    conv = Conversation(EngineBridge(), system_prompt="Be brief.", params=params, messages=[
        ChatMessage("user", CHATS[0][0]["content"]),
        ChatMessage("assistant", first.text, token_ids=list(first.tokens)),
        ChatMessage("user", "and then"),
    ])
    messages = conv.prompt_messages()
    assert messages[2]["token_ids"]  # what a local engine would be handed
    # The server tokenizes the text, so the engine's answer to the same text is the reference
    # (ids of a random model's reply need not survive decode and re-encode).
    local = engine.submit([{"role": m["role"], "content": m["content"]} for m in messages],
                          params=params)
    bridge = EngineBridge()
    bridge.remotes.find = lambda name: (Connection(mlx_server.url, model=MODEL)
                                        if name == "mlx" else None)
    try:
        # the tab's path: the bridge routes the reply to the saved connection
        gen = bridge.submit(tab_request(messages, params, local=False), bridge.route("mlx"),
                            tag="tab-1")
        deltas, finished = [], []
        gen.delta.connect(deltas.append)
        gen.finished.connect(finished.append)
        ended = asyncio.get_running_loop().create_future()
        gen.finished.connect(lambda g: ended.done() or ended.set_result(None))
        await asyncio.wait_for(ended, timeout=60)
    finally:
        await bridge.remotes.close()
    assert finished == [gen] and "".join(deltas) == gen.text == await local.result()
    assert gen.finish_reason == "length" and gen.error is None and gen.tokens == []
    stats = gen.stats
    assert isinstance(stats, ReplyStats) and stats.generated_tokens == 8
    assert stats.prompt_tokens == len(local.prompt_tokens) and stats.ttft_s is not None
