"""A real server on loopback against the requests issue #28 found weak: an over-long header,
a slowloris, a client that disconnects mid-stream, a system-only chat, a KV budget too small
for the prompt."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import aiohttp
import pytest

from tests.server.conftest import MODEL, wait_for


async def raw_exchange(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `request` as it is on a fresh socket; the status, headers and body back."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 30)  # the server closes after an error
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}
    return int(status_line.split()[1]), headers, body


async def test_an_over_long_header_gets_json_and_one_log_line(serve, caplog):
    s = await serve()
    caplog.set_level(logging.DEBUG)
    status, headers, body = await raw_exchange(
        s.url, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n")
    assert status == 431
    assert headers["content-type"].startswith("application/json")
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "request_header_too_large" and "8190 bytes" in error["message"]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert any("refused a request" in r.getMessage() for r in caplog.records)
    # a request line that is not HTTP at all: a 400 in the same shape
    status, headers, body = await raw_exchange(s.url, b"\x16\x03\x01 hello\r\n\r\n")
    assert status == 400 and json.loads(body)["error"]["code"] == "invalid_request"
    assert not [r for r in caplog.records if r.exc_info]
    async with aiohttp.ClientSession() as http, http.get(s.url + "/health") as r:
        assert r.status == 200  # and the server carries on


async def test_a_slowloris_is_closed_and_slow_replies_are_not(serve):
    s = await serve(engine={"context_length": 100_000}, head_timeout_s=0.5)
    host, port = s.url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    t0 = time.monotonic()
    closed = False
    for byte in b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"z" * 200:
        try:
            writer.write(bytes([byte]))
            await writer.drain()
        except ConnectionError:
            closed = True
            break
        try:  # the server closes: read() ends at once
            if await asyncio.wait_for(reader.read(), 0.05) == b"":
                closed = True
                break
        except TimeoutError:
            pass
    writer.close()
    assert closed, "the slow head was never timed out"
    assert time.monotonic() - t0 < 8
    # an idle connection that never sends anything is closed too
    reader, writer = await asyncio.open_connection(host, int(port))
    assert await asyncio.wait_for(reader.read(), 10) == b""
    writer.close()
    # the clock is the head's alone: a reply that streams for longer than it goes on
    async with aiohttp.ClientSession() as http, http.post(
            s.url + "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "go"}],
                  "max_tokens": 50_000, "stream": True}) as r:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.0:  # four head timeouts
            line = await r.content.readline()
            assert line and line != b"data: [DONE]\n", "the stream ended early"


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


async def test_a_client_that_disconnects_is_counted_in_metrics(serve):
    s = await serve(engine={"context_length": 100_000})  # a stream that would go on
    aborted = 'batchchat_request_success_total{finished_reason="abort"}'
    async with aiohttp.ClientSession() as http:
        response = await http.post(
            s.url + "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "go on"}],
                  "max_tokens": 50_000, "stream": True})
        assert response.status == 200
        for _ in range(3):
            await response.content.readline()
        response.close()  # drop the connection mid-stream
    await wait_for(lambda: not s.server._streams, tries=2000)

    async def scrape() -> str:
        async with aiohttp.ClientSession() as http, http.get(s.url + "/metrics") as r:
            return await r.text()

    assert metric(await scrape(), aborted) == 1
    # a request that finishes is counted by its own reason, not as an abort
    await s.client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=3)
    text = await scrape()
    assert metric(text, aborted) == 1
    assert metric(text, 'batchchat_request_success_total{finished_reason="length"}') == 1


async def test_a_chat_of_only_a_system_message_is_answered(serve):
    s = await serve()
    reply = await s.client.chat.completions.create(
        model=MODEL, messages=[{"role": "system", "content": "You answer in French."}],
        max_tokens=3)
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens == 3


async def test_a_chat_with_no_text_at_all_is_still_refused(serve):
    s = await serve()
    async with aiohttp.ClientSession() as http, http.post(
            s.url + "/v1/chat/completions",
            json={"model": MODEL, "max_tokens": 3,
                  "messages": [{"role": "system", "content": " "},
                               {"role": "user", "content": ""}]}) as r:
        assert r.status == 400
        assert "no message has any content" in (await r.json())["error"]["message"]


@pytest.fixture
def per_token(make_engine) -> int:
    """KV bytes per token of the tiny model."""
    return make_engine().stats().kv_bytes_per_token


async def chat_error(url: str, max_tokens: int | None) -> tuple[int, str]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hello there"}]}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    async with aiohttp.ClientSession() as http, http.post(
            url + "/v1/chat/completions", json=body) as r:
        data = await r.json()
        return r.status, data["error"]["message"] if r.status != 200 else ""


async def test_a_kv_budget_too_small_for_the_prompt_says_what_can_help(serve, per_token):
    """Not "lower max_tokens" when even the prompt does not fit (the KV budget holds fewer
    tokens than one allocation step)."""
    s = await serve(engine={"kv_budget_bytes": per_token * 100})
    status, message = await chat_error(s.url, 1)
    assert status == 400
    assert "shorten the prompt or raise the KV budget" in message
    assert "--kv-budget-mb" in message and "max_tokens" not in message


async def test_a_kv_budget_that_holds_the_prompt_names_the_max_tokens_that_fit(serve,
                                                                               per_token):
    s = await serve(engine={"kv_budget_bytes": per_token * 400})
    status, message = await chat_error(s.url, None)  # to the end of the context
    assert status == 400
    fits = int(message.split("set max_tokens to at most ")[1].split(",")[0])
    assert "raise the KV budget" in message
    assert (await chat_error(s.url, fits))[0] == 200  # the advice is exact
    assert (await chat_error(s.url, fits + 1))[0] == 400
