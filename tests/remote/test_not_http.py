"""A server that answers bytes that are not HTTP, or streams a line longer than the client
reads, is named in one clear sentence, in a chat's stream, the model list and the
simulator's CLI; never aiohttp's own text, whose "400" no server sent (issue #28). Real
servers on loopback."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.remote import Connection, RemoteClient, RemoteError, list_models
from tests.remote.broken_server import (
    API_KEY,
    LONG_LINE,
    PARTIAL,
    BrokenServer,
    start_not_http_server,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def not_http() -> AsyncIterator[str]:
    srv, url = await start_not_http_server()
    async with srv:
        yield url


async def reply(url: str, model: str = "m"):
    client = RemoteClient(Connection(url, model=model, api_key=API_KEY, name="testsrv"))
    try:
        stream = client.submit([{"role": "user", "content": "hi"}], params={"max_tokens": 8})
        return stream, [e async for e in stream]
    finally:
        await client.close()


def assert_not_http(text: str, url: str) -> None:
    assert f"the server at {url} did not answer HTTP" in text, text
    assert "SSH-2.0" in text  # what it sent instead
    # no invented status (a port number such as 40089 may hold the digits)
    assert not re.search(r"\b400\b", text) and "ClientResponseError" not in text


async def test_a_chat_stream_names_a_server_that_does_not_speak_http(not_http):
    stream, events = await reply(not_http)
    assert stream.finish_reason == "error" and len(events) == 1
    assert stream.error.startswith("testsrv: ")
    assert_not_http(stream.error, not_http)


async def test_the_model_list_names_it_too(not_http):
    with pytest.raises(RemoteError) as info:
        await list_models(Connection(not_http, name="testsrv"))
    assert_not_http(str(info.value), not_http)


async def test_the_simulator_cli_shows_the_clear_message(not_http):
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.simulator", "--target", not_http, "--model", "m",
        "--requests", "1", "--max-tokens", "4:4", cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    stderr = err.decode()
    assert proc.returncode == 1, stderr
    assert "every request failed" in stderr and "Traceback" not in stderr
    assert_not_http(stderr, not_http)
    assert "failed 1" in out.decode()


async def test_an_over_long_event_line_is_named_with_its_limit():
    server = BrokenServer()
    await server.start()
    try:
        stream, _ = await reply(server.url, "long-line")
    finally:
        await server.stop()
    assert stream.finish_reason == "error" and stream.text == "".join(PARTIAL)
    said = re.fullmatch(r"testsrv: the server sent a line longer than (\d+) bytes",
                        stream.error)
    assert said is not None, stream.error
    assert 64 * 1024 <= int(said.group(1)) < LONG_LINE
