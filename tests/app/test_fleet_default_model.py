"""The window's default model beside its ModelManager (issue #50), Qt-free, real engines on
tiny random models: the default model's memory counts in the manager's budget (a load is
refused naming it, or evicts another model, with the true figure), and the window's own API
server serves every model as `serve --models-dir` does: a name of the library loads that
model just in time under the tabs' manager, /v1/models lists the default model first and the
others with their state, any other name is answered by the default model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import aiohttp
import openai
import pytest

from app.backend.local_target import load_target
from app.bridge import EngineBridge
from app.fleet import Catalog, ModelManager, NoRoom
from app.models.library import folder_models
from app.server.in_app import AppServer
from app.settings import Settings
from tests.api_clients import openai_client
from tests.fleet_models import tiny_gguf

KV = 16 << 20
HELLO = [{"role": "user", "content": "Name three colours."}]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    """Three tiny random models of the same size."""
    d = tmp_path_factory.mktemp("fleet-default")
    for i, name in enumerate("abc"):
        tiny_gguf(d / f"tiny-{name}.gguf", seed=i)
    return d


async def window_bridge(folder: Path, **kw) -> EngineBridge:
    """The default model: tiny-a, loaded by the ModelHost as the model button does; beside
    it a ModelManager over the same folder (the library's list)."""
    bridge = EngineBridge(loader=lambda source: load_target(
        source, kv_budget_bytes=KV, max_concurrent=8).engine)
    bridge.fleet = ModelManager(Catalog(lambda: folder_models(folder)), kv_budget_bytes=KV,
                                max_concurrent=8, **kw)
    assert await bridge.load(str(folder / "tiny-a.gguf"))
    return bridge


async def test_the_default_model_counts_in_the_budget(tiny_dir):
    probe = ModelManager(Catalog(lambda: folder_models(tiny_dir)), kv_budget_bytes=KV)
    need = probe.estimate("tiny-b").total
    default_need = probe.estimate("tiny-a").total
    # room for the default model and one and a half others: b and c do not both fit
    bridge = await window_bridge(tiny_dir, budget_bytes=default_need + need * 3 // 2)
    fleet = bridge.fleet
    try:
        held = bridge.models.held()
        assert [(h.name, h.need.total) for h in held] == [("tiny-a", default_need)]
        assert fleet.used_bytes() == default_need
        await fleet.load("tiny-b")
        assert fleet.used_bytes() == default_need + need
        await fleet.load("tiny-c")  # b is evicted: the default model's share is taken
        assert [m.name for m in fleet.running()] == ["tiny-c"]
        assert bridge.local is not None, "the default model is never evicted by the manager"

        fleet.budget_bytes = default_need + need // 2  # a tab model cannot fit beside it
        await fleet.unload("tiny-c")
        with pytest.raises(NoRoom) as caught:
            await fleet.load("tiny-b")
        assert caught.value.to_unload == ("tiny-a",)
        assert "unload 'tiny-a' first" in str(caught.value)
        assert caught.value.free == need // 2
    finally:
        await bridge.shutdown(timeout=5.0)


async def alone(source: Path, messages: list, **params) -> str:
    target = await asyncio.to_thread(load_target, str(source), kv_budget_bytes=KV)
    await target.start()
    try:
        stream = target.submit(messages, params=params)
        async for _ in stream:
            pass
        return stream.text
    finally:
        await target.shutdown()


async def test_the_window_server_loads_library_models_just_in_time(tiny_dir, tmp_path):
    expected = {name: await alone(tiny_dir / f"{name}.gguf", HELLO, max_tokens=12,
                                  temperature=0.0) for name in ("tiny-a", "tiny-b")}
    assert expected["tiny-a"] != expected["tiny-b"]
    bridge = await window_bridge(tiny_dir)
    settings = Settings(tmp_path / "settings.json")
    settings.server_port = 0  # any free port
    server = AppServer(SimpleNamespace(bridge=bridge, settings=settings, records=None,
                                       api_responses=None))  # type: ignore[arg-type]
    assert await server.start(), server.error
    client = openai_client(server.url, api_key="unused", max_retries=0, timeout=120)
    http = aiohttp.ClientSession()
    try:
        listed = [(m.id, m.model_extra["state"]) for m in (await client.models.list()).data]
        default_id = listed[0][0]
        assert listed == [(default_id, "loaded"), ("tiny-b", "available"),
                          ("tiny-c", "available")], "the default model first, listed once"

        async def ask(model: str) -> openai.types.chat.ChatCompletion:
            return await client.chat.completions.create(model=model, messages=HELLO,
                                                        max_tokens=12, temperature=0)

        reply = await ask("tiny-b")  # loads just in time, under the tabs' manager
        assert reply.model == "tiny-b" and reply.choices[0].message.content == expected["tiny-b"]
        assert [m.name for m in bridge.fleet.running()] == ["tiny-b"]
        listed = {m.id: m.model_extra["state"] for m in (await client.models.list()).data}
        assert listed == {default_id: "loaded", "tiny-b": "loaded", "tiny-c": "available"}
        # the default model by its id, its file's name, or any other name (as before)
        for name in (default_id, "tiny-a", "tiny-a.gguf", "gpt-4o"):
            reply = await ask(name)
            assert reply.model == default_id, name
            assert reply.choices[0].message.content == expected["tiny-a"], name
        assert [m.name for m in bridge.fleet.running()] == ["tiny-b"], "no second copy"

        async with http.get(server.server.url + "/models/running") as r:
            running = await r.json()
        assert [(m["id"], m["state"], m["pinned"]) for m in running["data"]] == \
            [(default_id, "loaded", True), ("tiny-b", "loaded", False)]
        assert running["used_bytes"] == bridge.fleet.used_bytes()
        async with http.post(server.server.url + "/models/unload",
                             json={"model": "tiny-a"}) as r:
            assert r.status == 400 and "default model" in (await r.json())["error"]["message"]
        async with http.get(server.server.url + "/metrics") as r:
            text = await r.text()
        assert f'batchchat_generation_tokens_total{{model="{default_id}"}} 48' in text
        assert 'batchchat_generation_tokens_total{model="tiny-b"} 12' in text
        async with http.post(server.server.url + "/models/unload",
                             json={"model": "tiny-b"}) as r:
            assert r.status == 200 and (await r.json())["unloaded"] is True
        assert bridge.fleet.running() == []
    finally:
        await http.close()
        await client.close()
        await server.stop()
        await bridge.shutdown(timeout=5.0)
