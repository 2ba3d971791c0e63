"""Issue #50's first Done-when line as one scene: the bundled model and a second model file (its
Q8_0 copy by gguf-py) serve interleaved tabs AND API requests at the same time, and each
reply equals that model's answer alone, greedy and seeded. Two tabs (one per model) stream
while the window's own API server (the official `openai` client on loopback) answers
seeded and greedy requests naming either model. The API's answers alone come from an engine
of each model's own, loaded apart; a tab's from a tab on that model with nothing else
running."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from app.backend.local_target import load_target
from tests.api_clients import openai_client
from tests.fleet_models import bundled_path

from .conftest import run_until
from .two_models import KV, OTHER, PROMPT, on_model, other_model_dir, reply_of, two_model_bridge

MESSAGES = [{"role": "user", "content": PROMPT}]
TOKENS = 40
GREEDY = {"max_tokens": TOKENS, "temperature": 0.0}
SEEDED = {"max_tokens": TOKENS, "temperature": 0.9, "top_p": 0.95, "seed": 1234}


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: Any) -> Path:
    return other_model_dir(tmp_path_factory)


@pytest.fixture
def bridge(loop: Any, models_dir: Path) -> Any:
    yield from two_model_bridge(loop, models_dir)


async def alone(source: Path) -> dict[str, str]:
    """The model's greedy and seeded answers on an engine of its own, one at a time."""
    target = await asyncio.to_thread(load_target, str(source), kv_budget_bytes=KV)
    await target.start()
    try:
        out = {}
        for name, params in (("greedy", GREEDY), ("seeded", SEEDED)):
            stream = target.submit(MESSAGES, params=params)
            async for _ in stream:
                pass
            out[name] = stream.text
        return out
    finally:
        await target.shutdown()


def test_tabs_and_api_requests_on_two_models_at_once(make_window, bridge, loop, models_dir):
    expected = {None: loop.run_until_complete(alone(bundled_path())),
                OTHER: loop.run_until_complete(alone(models_dir / f"{OTHER}.gguf"))}
    assert expected[None] != expected[OTHER], "the two models answer differently"
    window = make_window(bridge)
    window.ctx.settings.server_port = 0  # any free port
    server = window.api_server.server
    assert loop.run_until_complete(server.start()), server.error
    default_id = server.model_id()
    client = openai_client(server.url, api_key="unused", max_retries=0, timeout=300)

    async def ask(model: str, params: dict) -> tuple[str, str]:
        reply = await client.chat.completions.create(model=model, messages=MESSAGES, **params)
        return reply.model, reply.choices[0].message.content or ""

    try:
        # a tab's answer alone, per model: a tab's request (its template's system prompt
        # and settings) is its own, so its reference is a tab on that model, one at a time
        tab_alone = {}
        for model in (None, OTHER):
            tab = on_model(window, model, TOKENS)
            assert tab.send_text(PROMPT)
            tab_alone[model] = reply_of(tab, loop).content
        loop.run_until_complete(bridge.fleet.unload(OTHER))  # it loads again below
        tabs = {None: on_model(window, None, TOKENS), OTHER: on_model(window, OTHER, TOKENS)}
        for tab in tabs.values():
            assert tab.send_text(PROMPT)
        # while the tabs stream (the Q8_0 copy loading for its tab), the API's requests
        asked = [(OTHER, "seeded"), (default_id, "seeded"), (OTHER, "greedy"),
                 (default_id, "greedy")]
        async def all_asked() -> list[tuple[str, str]]:
            return await asyncio.gather(*(ask(model, SEEDED if kind == "seeded" else GREEDY)
                                          for model, kind in asked))

        api = loop.create_task(all_asked())
        replies = {m: t.conversation.messages[-1] for m, t in tabs.items()}
        run_until(loop, lambda: api.done() or any(r.content and r.streaming
                                                  for r in replies.values()), timeout=120)
        assert not api.done(), "the API's requests ran while a tab streamed"
        run_until(loop, api.done, timeout=300)
        got = api.result()
        for (model, kind), (named, text) in zip(asked, got, strict=True):
            assert named == model
            assert text == expected[None if model == default_id else OTHER][kind], (model, kind)
        for model, tab in tabs.items():
            reply = reply_of(tab, loop)
            assert reply.model == model and reply.content == tab_alone[model], model
        assert [m.name for m in bridge.fleet.running()] == [OTHER]
    finally:
        loop.run_until_complete(client.close())
        loop.run_until_complete(server.stop())
