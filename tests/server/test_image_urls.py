"""http(s) URLs in `image_url` parts (#52): refused by default, with how to enable them;
fetched when the server is started with --allow-image-urls. Real sockets on loopback: an
aiohttp server on 127.0.0.1 serves a PNG, a 404, a slow answer, an oversized body, a
truncated PNG and a redirect loop; the official openai client talks to a real in-process
server over them, so each failure is a 400 naming the part with the reason in words; and
`batchchat serve --allow-image-urls` as a real process fetches from the same server."""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import time
from collections.abc import AsyncIterator

import openai
import pytest
from aiohttp import web

from app.images import fetch
from app.images.read import MAX_BYTES
from app.server.serve import parse_args
from engine import Engine
from tests.api_clients import openai_client
from tests.server.conftest import MODEL, serving
from tests.server.test_serve_command import ROOT, read_until
from tests.vision_models import make_tiny_vlm, png_bytes

RED = png_bytes((200, 10, 10))
PART = "messages[0].content[1]"


@pytest.fixture
async def images() -> AsyncIterator[str]:
    """The base URL of a loopback server with one route per case."""
    async def png(_: web.Request) -> web.Response:
        return web.Response(body=RED, content_type="image/png")

    # the slow answer takes 60 s unless the fixture ends first: aiohttp's cleanup waits for
    # handlers still running, so without the release every test using it waited out the 60 s
    released = asyncio.Event()

    async def slow(_: web.Request) -> web.Response:
        try:
            await asyncio.wait_for(released.wait(), 60)
        except TimeoutError:
            pass
        return web.Response(body=RED, content_type="image/png")

    async def huge(_: web.Request) -> web.Response:
        return web.Response(body=b"\0" * (MAX_BYTES + 1), content_type="image/png")

    async def huge_unsized(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()  # chunked: no Content-Length to refuse it by
        await resp.prepare(request)
        block = b"\0" * (1 << 20)
        for _ in range(MAX_BYTES // len(block) + 2):
            await resp.write(block)
        await resp.write_eof()
        return resp

    async def cut(_: web.Request) -> web.Response:
        return web.Response(body=RED[:60], content_type="image/png")

    async def loop(_: web.Request) -> web.Response:
        raise web.HTTPFound("/loop")

    async def moved(_: web.Request) -> web.Response:
        raise web.HTTPFound("/red.png")

    app = web.Application()
    app.add_routes([web.get("/red.png", png), web.get("/slow.png", slow),
                    web.get("/huge.png", huge), web.get("/unsized.png", huge_unsized),
                    web.get("/cut.png", cut), web.get("/loop", loop),
                    web.get("/moved.png", moved)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        released.set()
        await runner.cleanup()


@pytest.fixture
def allowed(monkeypatch) -> None:
    """--allow-image-urls for this test, with a 1 s fetch limit so the slow case is quick."""
    monkeypatch.setattr(fetch, "FETCH_TIMEOUT_S", 1.0)
    fetch.allow_image_urls(True)
    yield
    fetch.allow_image_urls(False)


def _asking(url: str) -> list[dict]:
    return [{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                         {"type": "image_url", "image_url": {"url": url}}]}]


async def _refused(client, url: str) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as e:
        await client.chat.completions.create(model=MODEL, max_tokens=4, messages=_asking(url))
    return e.value


def test_serve_takes_the_option() -> None:
    assert parse_args(["--allow-image-urls"]).allow_image_urls is True
    assert parse_args([]).allow_image_urls is False


async def test_by_default_a_url_is_refused_saying_how_to_enable_it(serve, images) -> None:
    s = await serve()
    err = await _refused(s.client, images + "/red.png")
    assert err.body["param"] == PART + ".image_url.url"
    assert "not fetched" in err.message and "--allow-image-urls" in err.message


async def test_each_failure_is_a_400_naming_the_part_with_the_reason(
        serve, images, allowed) -> None:
    s = await serve()
    # a closed port: take a free one, then close it
    probe = await asyncio.start_server(lambda *_: None, "127.0.0.1", 0)
    closed = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    cases = {
        "/nothing.png": "HTTP 404 Not Found",
        "/huge.png": "image limit",
        "/unsized.png": "image limit",
        "/cut.png": "damaged or truncated",
        "/loop": "redirected more than 3 times",
    }
    for path, reason in cases.items():
        err = await _refused(s.client, images + path)
        assert err.body["param"] == PART + ".image_url.url", path
        assert reason in err.message, (path, err.message)
    err = await _refused(s.client, f"http://127.0.0.1:{closed}/red.png")
    assert err.body["param"] == PART + ".image_url.url"
    assert f"could not connect to 127.0.0.1:{closed}" in err.message
    t0 = time.monotonic()
    err = await _refused(s.client, images + "/slow.png")
    assert time.monotonic() - t0 < 20  # the 1 s limit, not the endpoint's 60 s
    assert err.body["param"] == PART + ".image_url.url"
    assert "took longer than 1 s" in err.message
    # the server still answers afterwards
    r = await s.client.chat.completions.create(model=MODEL, max_tokens=2, messages=[
        {"role": "user", "content": "Hi"}])
    assert r.choices[0].finish_reason == "length"


async def test_a_fetched_image_reaches_a_text_only_model_as_an_image(
        serve, images, allowed) -> None:
    # fetched and read (a redirect followed): the refusal is the text-only model's, naming
    # the part itself, not a fetch failure naming its url
    s = await serve()
    for path in ("/red.png", "/moved.png"):
        err = await _refused(s.client, images + path)
        assert err.body["param"] == PART, err.message
        assert "reads text only" in err.message


async def test_a_fetched_image_gets_the_answer_its_data_url_gets(
        tmp_path, images, allowed) -> None:
    engine = Engine.load(str(make_tiny_vlm(tmp_path / "smolvlm", "smolvlm")))
    async with serving(engine) as s:
        inline = "data:image/png;base64," + base64.b64encode(RED).decode()
        answers = []
        for url in (inline, images + "/red.png"):
            r = await s.client.chat.completions.create(
                model=MODEL, messages=_asking(url), max_tokens=6, temperature=0)
            answers.append((r.choices[0].message.content, r.usage.prompt_tokens))
        assert answers[0] == answers[1]
        assert answers[0][0]  # something was generated


async def test_batchchat_serve_with_the_option_fetches(tiny_dir, images) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "batchchat", "serve", "--model", str(tiny_dir), "--port", "0",
        "--served-model-name", MODEL, "--allow-image-urls", cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, env=os.environ | {"BATCHCHAT_API_KEY": ""})
    try:
        line = await read_until(proc, "ready at")
        client = openai_client(line.split("ready at ", 1)[1].split()[0],
                               api_key="unused", max_retries=0, timeout=60)
        # fetched: the tiny model reads text only, so the 400 names the part itself
        err = await _refused(client, images + "/red.png")
        assert err.body["param"] == PART and "reads text only" in err.message
        err = await _refused(client, images + "/nothing.png")
        assert err.body["param"] == PART + ".image_url.url"
        assert "HTTP 404 Not Found" in err.message
        await client.close()
    finally:
        proc.kill()
        await proc.wait()
