"""Several models behind the API server (issue #50): the official `openai` client loads a
model just in time by name, /v1/models lists every model with its state, the load / unload /
running paths over real HTTP, a TTL per request, /metrics by model, and `batchchat serve
--models-dir` with `batchchat ps / load / unload` as real processes."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import openai
import pytest
from openai import AsyncOpenAI

from app.backend.local_target import load_target
from app.fleet import Catalog, ModelManager
from app.models.library import folder_models
from app.server import ApiServer, ServerConfig
from app.server.fleet_api import FleetApi
from tests.api_clients import openai_client
from tests.fleet_models import bundled_path, tiny_gguf

ROOT = Path(__file__).resolve().parents[2]
KV = 16 << 20
HELLO = [{"role": "user", "content": "Name three colours."}]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    """The bundled model (a link) and two tiny random models."""
    d = tmp_path_factory.mktemp("fleet-api")
    (d / "smol.gguf").symlink_to(bundled_path())
    for i, name in enumerate("ab"):
        tiny_gguf(d / f"tiny-{name}.gguf", seed=i)
    return d


@dataclass
class Fleet:
    server: ApiServer
    fleet: ModelManager
    client: AsyncOpenAI
    url: str
    http: aiohttp.ClientSession


@asynccontextmanager
async def fleet_server(folder: Path, kv: int = KV, **kw) -> AsyncIterator[Fleet]:
    fleet = ModelManager(Catalog(lambda: folder_models(folder)), kv_budget_bytes=kv,
                         max_concurrent=8, reap_interval_s=0.05, **kw)
    fleet.start()
    api = FleetApi(fleet)
    server = ApiServer(api.target, api.model_id, ServerConfig(port=0), fleet=api)
    url = await server.start()
    client = openai_client(url + "/v1", api_key="unused", max_retries=0, timeout=120)
    http = aiohttp.ClientSession()
    try:
        yield Fleet(server, fleet, client, url, http)
    finally:
        await http.close()
        await client.close()
        await server.stop()
        await fleet.close()


async def alone(source: Path, messages: list, **params) -> str:
    """The answer of the model at `source` alone, on an engine of its own."""
    target = await asyncio.to_thread(load_target, str(source), kv_budget_bytes=KV)
    await target.start()
    try:
        stream = target.submit(messages, params=params)
        async for _ in stream:
            pass
        return stream.text
    finally:
        await target.shutdown()


async def test_the_openai_client_loads_a_model_just_in_time_by_name(models_dir):
    expected = await alone(models_dir / "smol.gguf", HELLO, max_tokens=24, temperature=0.0)
    async with fleet_server(models_dir) as f:
        listed = {m.id: m.model_extra["state"] for m in (await f.client.models.list()).data}
        assert listed == {"smol": "available", "tiny-a": "available", "tiny-b": "available"}
        reply = await f.client.chat.completions.create(model="smol", messages=HELLO,
                                                       max_tokens=24, temperature=0)
        assert reply.model == "smol"
        assert reply.choices[0].message.content == expected
        listed = {m.id: m.model_extra["state"] for m in (await f.client.models.list()).data}
        assert listed["smol"] == "loaded" and listed["tiny-a"] == "available"
        # the file name works too, and an unknown name is a 404 listing the models
        again = await f.client.chat.completions.create(model="smol.gguf", messages=HELLO,
                                                       max_tokens=24, temperature=0)
        assert again.choices[0].message.content == expected
        with pytest.raises(openai.NotFoundError, match="'smol', 'tiny-a', 'tiny-b'"):
            await f.client.chat.completions.create(model="nope", messages=HELLO)


async def test_two_models_stream_at_once_each_as_alone(models_dir):
    params = {"max_tokens": 64, "temperature": 0.8, "seed": 7}
    expected = {n: await alone(models_dir / f"{n}.gguf", HELLO, **params)
                for n in ("tiny-a", "tiny-b")}
    async with fleet_server(models_dir) as f:
        async def ask(name: str) -> str:
            stream = await f.client.chat.completions.create(
                model=name, messages=HELLO, stream=True, **params)
            return "".join([c.choices[0].delta.content or "" async for c in stream
                            if c.choices])

        got = await asyncio.gather(ask("tiny-a"), ask("tiny-b"), ask("tiny-a"))
        assert got == [expected["tiny-a"], expected["tiny-b"], expected["tiny-a"]]


async def test_load_unload_and_running_over_http(models_dir):
    async with fleet_server(models_dir, kv=256 << 20) as f:  # room for 2,000 tokens
        async with f.http.post(f.url + "/models/load", json={"model": "tiny-a",
                                                             "estimate_only": True}) as r:
            estimate = await r.json()
            assert r.status == 200 and estimate["estimate_bytes"] > 256 << 20
        async with f.http.get(f.url + "/models/running") as r:
            assert (await r.json())["data"] == []  # an estimate loads nothing
        async with f.http.post(f.url + "/models/load",
                               json={"model": "tiny-a", "ttl": 600, "pin": True}) as r:
            model = (await r.json())["model"]
            assert r.status == 200
            assert (model["id"], model["state"], model["ttl"], model["pinned"]) == \
                ("tiny-a", "loaded", 600, True)
            assert model["estimate_bytes"] == estimate["estimate_bytes"]
        async with f.http.get(f.url + "/models/running") as r:
            listing = await r.json()
            assert [m["id"] for m in listing["data"]] == ["tiny-a"]
            assert listing["used_bytes"] == estimate["estimate_bytes"]
        async with f.http.get(f.url + "/models") as r:
            states = {m["id"]: m["state"] for m in (await r.json())["data"]}
            assert states == {"tiny-a": "loaded", "smol": "available", "tiny-b": "available"}

        # unloading a busy model waits for its reply ...
        story = [{"role": "user", "content": "Write a long story about a lighthouse."}]
        stream = await f.client.chat.completions.create(
            model="smol", messages=story, stream=True, max_tokens=200, temperature=0)
        first = await anext(aiter(stream))
        unload = asyncio.ensure_future(f.http.post(f.url + "/models/unload",
                                                   json={"model": "smol"}))
        await asyncio.sleep(0.2)
        assert not unload.done()  # the reply runs on
        async with f.http.get(f.url + "/models/running") as r:
            states = {m["id"]: m["state"] for m in (await r.json())["data"]}
            assert states == {"tiny-a": "loaded", "smol": "unloading"}
        chunks = [first] + [c async for c in stream]
        assert chunks[-1].choices[0].finish_reason in ("length", "stop")
        assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 20
        async with await unload as r:
            assert r.status == 200 and await r.json() == {"model": "smol", "unloaded": True}
        assert [m.name for m in f.fleet.running()] == ["tiny-a"]
        # ... or cancels it
        stream = await f.client.chat.completions.create(
            model="smol", messages=story, stream=True, max_tokens=2000, temperature=0)
        await anext(aiter(stream))
        async with f.http.post(f.url + "/models/unload",
                               json={"model": "smol", "cancel": True}) as r:
            assert r.status == 200 and (await r.json())["unloaded"] is True
        rest = [c async for c in stream]
        assert rest[-1].choices[0].finish_reason == "cancelled"
        async with f.http.post(f.url + "/models/unload", json={"model": "tiny-a"}) as r:
            assert (await r.json())["unloaded"] is True
        async with f.http.post(f.url + "/models/unload", json={"model": "tiny-a"}) as r:
            assert (await r.json())["unloaded"] is False  # not loaded any more
        async with f.http.post(f.url + "/models/load", json={"model": "tiny-a",
                                                             "ttl": "5m"}) as r:
            assert r.status == 400 and (await r.json())["error"]["param"] == "ttl"
        async with f.http.post(f.url + "/models/load", json={"model": "x"}) as r:
            assert r.status == 404


async def test_keep_alive_per_request_and_refusal_with_the_estimate(models_dir):
    probe = ModelManager(Catalog(lambda: folder_models(models_dir)), kv_budget_bytes=KV)
    tiny = probe.estimate("tiny-a").total
    async with fleet_server(models_dir, budget_bytes=2 * tiny + tiny // 2) as f:
        await f.client.chat.completions.create(model="tiny-a", messages=HELLO, max_tokens=4,
                                               extra_body={"keep_alive": 0})
        for _ in range(100):
            if not f.fleet.running():
                break
            await asyncio.sleep(0.05)
        assert f.fleet.running() == []  # keep_alive 0: unloaded once idle
        with pytest.raises(openai.BadRequestError, match="does not fit: it needs ~") as caught:
            await f.client.chat.completions.create(model="smol", messages=HELLO, max_tokens=4)
        assert caught.value.body["param"] == "model" and "larger than the whole budget" in \
            caught.value.body["message"]


async def test_metrics_are_labelled_by_model(models_dir):
    async with fleet_server(models_dir) as f:
        for name in ("tiny-a", "tiny-b"):
            await f.client.chat.completions.create(model=name, messages=HELLO, max_tokens=5)
        async with f.http.get(f.url + "/metrics") as r:
            text = await r.text()
        assert 'batchchat_generation_tokens_total{model="tiny-a"} 5' in text
        assert 'batchchat_generation_tokens_total{model="tiny-b"} 5' in text
        assert text.count("# TYPE batchchat_generation_tokens_total counter") == 1
        assert "batchchat_models_memory_estimate_bytes " in text
        assert 'batchchat_http_requests_total{endpoint="/v1/chat/completions",status="200"} 2' \
            in text
        async with f.http.get(f.url + "/health") as r:
            assert r.status == 200


async def run(*args: str, env: dict | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "batchchat", *args, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode, out.decode(), err.decode()


async def test_serve_models_dir_with_ps_load_unload(models_dir, tmp_path):
    env = os.environ | {"BATCHCHAT_API_KEY": ""}
    (tmp_path / "tiny").mkdir()
    for name in ("tiny-a", "tiny-b"):
        (tmp_path / "tiny" / f"{name}.gguf").symlink_to(models_dir / f"{name}.gguf")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "batchchat", "serve", "--models-dir", str(tmp_path / "tiny"),
        "--model", "bundled", "--max-models", "1", "--kv-budget-mb", "16", "--port", "0",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, env=env)
    try:
        for _ in range(50):
            line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode()
            if "ready at" in line or not line:
                break
        assert "3 models in" in line, line  # tiny-a, tiny-b and --model's
        base = line.split("ready at ", 1)[1].split()[0][:-3]
        env = env | {"BATCHCHAT_URL": base}
        code, out, _ = await run("ps", env=env)
        assert code == 0 and "(bundled)  loaded" in out.splitlines()[1], out  # --model's
        code, out, _ = await run("load", "tiny-a", "--ttl", "600", env=env)
        assert code == 0 and out.startswith("tiny-a loaded (needs ~"), out
        code, out, _ = await run("ps", env=env)
        assert code == 0 and out.splitlines()[0].split() == [
            "NAME", "STATE", "ESTIMATE", "RUNNING", "IDLE", "TTL", "PINNED"]
        assert out.splitlines()[1].split()[:2] == ["tiny-a", "loaded"] and "600 s" in out
        code, out, _ = await run("load", "tiny-b", env=env)  # --max-models 1: a goes
        code, out, _ = await run("ps", env=env)
        assert [line.split()[0] for line in out.splitlines()[1:-1]] == ["tiny-b"], out
        code, out, _ = await run("unload", "tiny-b", env=env)
        assert code == 0 and out.strip() == "tiny-b unloaded"
        code, out, err = await run("unload", "nope", env=env)
        assert code == 1 and "no model named 'nope'" in err
        code, out, err = await run("ps", env=env | {"BATCHCHAT_URL": "http://127.0.0.1:9"})
        assert code == 1 and "no BatchChat server at http://127.0.0.1:9" in err
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 30) == 0


async def test_the_responses_api_loads_its_model_just_in_time(models_dir):
    """POST /v1/responses names its model as a completion does: loaded on demand, and its
    text is that model's chat answer (it was a 503 'no model is ready' before)."""
    async with fleet_server(models_dir) as f:
        response = await f.client.responses.create(model="tiny-a", input="Name three colours.",
                                                   max_output_tokens=16, temperature=0)
        assert response.status in ("completed", "incomplete") and response.model == "tiny-a"
        chat = await f.client.chat.completions.create(model="tiny-a", messages=HELLO,
                                                      max_tokens=16, temperature=0)
        assert response.output_text == chat.choices[0].message.content


async def test_a_bad_keep_alive_beside_a_good_ttl_is_refused(models_dir):
    """Both fields are checked, an estimate's too: a body with a valid `ttl` and
    `keep_alive: true` was answered (found by the fleet fuzz's negative cases)."""
    async with fleet_server(models_dir) as f:
        async with f.http.post(f.url + "/models/load", json={
                "model": "tiny-a", "ttl": 5, "keep_alive": True, "estimate_only": True}) as r:
            error = (await r.json())["error"]
            assert r.status == 400 and error["param"] == "keep_alive"
        async with f.http.post(f.url + "/models/load", json={
                "model": "tiny-a", "ttl": 5, "keep_alive": "5m", "estimate_only": True}) as r:
            assert r.status == 200
