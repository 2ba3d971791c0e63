"""Every failure a remote server can cause ends the stream with a clear message naming the
server and the problem, keeps the partial text, and never hangs (a deliberately broken
aiohttp server on loopback)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator

import pytest

from app.remote import Connection, RemoteClient, RemoteError, list_models
from bench.mlx_lm_server import free_port
from tests.remote.broken_server import API_KEY, PARTIAL, BrokenServer, start_eof_server

PARTIAL_TEXT = "".join(PARTIAL)


@pytest.fixture
async def server() -> AsyncIterator[BrokenServer]:
    srv = BrokenServer()
    await srv.start()
    yield srv
    await srv.stop()


async def reply(url: str, model: str, key: str | None = API_KEY, **conn_kw):
    client = RemoteClient(Connection(url, model=model, api_key=key, name="testsrv", **conn_kw))
    try:
        stream = client.submit([{"role": "user", "content": "hi"}], params={"max_tokens": 8})
        events = [e async for e in stream]
        return stream, events
    finally:
        await client.close()


async def test_a_good_stream_gives_text_events_and_usage_counts(server):
    stream, events = await reply(server.url, "ok")
    assert stream.finish_reason == "stop" and stream.error is None
    assert stream.text == PARTIAL_TEXT
    assert [e.text for e in events[:-1]] == PARTIAL
    assert all(e.token == -1 for e in events[:-1]) and events[-1].token is None
    assert stream.tokens == []  # no ids from a server: never handed back to an engine
    s = stream.stats
    assert events[-1].stats is s and s.finish_reason == "stop"
    assert (s.prompt_tokens, s.generated_tokens, s.cached_tokens) == (11, 4, 3)  # from usage
    assert s.ttft_s is not None and 0 <= s.ttft_s <= s.e2e_s
    body = server.requests[0]
    assert body["stream"] and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 8 and "top_k" not in body and "repetition_penalty" not in body


@pytest.mark.parametrize(("model", "key", "expected"), [
    ("ok", "wrong", "testsrv: not authorized (401): the API key was refused: Invalid API key"),
    ("ok", None, "testsrv: not authorized (401): it needs an API key"),
    ("missing", API_KEY, "testsrv: not found (404): unknown model 'missing'"),
    ("busy", API_KEY, "testsrv: too many requests (429); retry after 7 s: rate limited"),
    ("boom", API_KEY, "testsrv: server error (500): Internal Server Error: out of memory"),
])
async def test_refusals_say_why(server, model, key, expected):
    stream, events = await reply(server.url, model, key)
    assert stream.finish_reason == "error" and stream.error.startswith(expected)
    assert stream.text == "" and len(events) == 1
    assert events[0].error == stream.error and stream.stats.finish_reason == "error"


async def test_a_dropped_connection_keeps_the_partial_reply(server):
    stream, _ = await reply(server.url, "drop")
    assert stream.finish_reason == "error"
    assert stream.text == PARTIAL_TEXT
    assert stream.error.startswith("testsrv: the server dropped the connection mid-reply")
    assert stream.stats.generated_tokens == len(PARTIAL)  # counted chunks: no usage came


async def test_a_clean_close_before_the_finish_is_a_drop_too():
    srv, url = await start_eof_server()
    async with srv:
        stream, _ = await reply(url, "ok")
    assert stream.finish_reason == "error" and stream.text == PARTIAL_TEXT
    assert stream.error == ("testsrv: the server dropped the connection mid-reply (the stream "
                            "ended without a finish reason)")


async def test_malformed_sse_keeps_the_partial_reply(server):
    stream, _ = await reply(server.url, "malformed")
    assert stream.finish_reason == "error" and stream.text == PARTIAL_TEXT
    assert stream.error.startswith("testsrv: malformed SSE data (not JSON)")


async def test_a_failure_reported_mid_stream(server):
    stream, _ = await reply(server.url, "midfail")
    assert stream.finish_reason == "error" and stream.text == PARTIAL_TEXT
    assert stream.error == "testsrv: the server failed mid-reply: engine died"
    stream, _ = await reply(server.url, "bad-choice")
    assert stream.finish_reason == "error" and stream.text == PARTIAL_TEXT
    assert stream.error.startswith("testsrv: malformed chunk (bad choice)")


async def test_a_finished_reply_whose_trailer_never_comes_is_still_finished(server):
    stream, _ = await asyncio.wait_for(reply(server.url, "no-trailer", read_timeout_s=0.3), 20)
    assert stream.finish_reason == "length" and stream.error is None
    assert stream.text == PARTIAL_TEXT and stream.stats.generated_tokens == len(PARTIAL)


@pytest.mark.parametrize("model", ["idle", "stall"])
async def test_a_silent_server_hits_the_read_timeout(server, model):
    stream, _ = await asyncio.wait_for(reply(server.url, model, read_timeout_s=0.3), 20)
    assert stream.finish_reason == "error"
    assert stream.error == "testsrv: the server sent nothing for 0.3 s (read timeout)"
    assert stream.text == ("" if model == "idle" else PARTIAL_TEXT)


async def test_json_instead_of_a_stream_and_a_choiceless_usage_chunk(server):
    stream, _ = await reply(server.url, "json")
    assert stream.finish_reason == "error" and stream.error.startswith(
        "testsrv: answered with application/json, not an event stream")
    stream, _ = await reply(server.url, "usage-only")
    assert stream.finish_reason == "stop" and stream.text == "hi"
    assert (stream.stats.prompt_tokens, stream.stats.generated_tokens) == (2, 1)


async def test_https_to_a_plain_http_server_is_a_tls_error(server):
    url = server.url.replace("http://", "https://")
    stream, _ = await reply(url, "ok")
    assert stream.finish_reason == "error"
    assert stream.error == (f"testsrv: TLS error connecting to {url}: wrong version number "
                            "(is it an https server?)")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
async def test_an_untrusted_certificate_is_a_tls_error(server, tmp_path):
    from aiohttp import web

    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(tmp_path / "k.pem"), "-out", str(tmp_path / "c.pem"),
                    "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    runner = web.AppRunner(server.app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    url = f"https://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore
    try:
        stream, _ = await reply(url, "ok")
    finally:
        await runner.cleanup()
    assert stream.finish_reason == "error" and not server.requests
    assert stream.error == (f"testsrv: TLS error connecting to {url}: its certificate was "
                            "not accepted (self-signed certificate)")


async def test_a_refused_connection():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    stream, _ = await reply(url, "ok")
    assert stream.finish_reason == "error"
    assert stream.error == f"testsrv: cannot reach {url}: connection refused"


async def test_a_connect_timeout():
    # A listener whose one-slot accept queue is full: further SYNs are dropped, so a
    # connect neither succeeds nor fails until the client gives up.
    with socket.socket() as listener, socket.socket() as filler:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        filler.connect(listener.getsockname())
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        stream, _ = await asyncio.wait_for(reply(url, "ok", connect_timeout_s=0.3), 20)
    assert stream.finish_reason == "error"
    assert stream.error == f"testsrv: no connection to {url} within 0.3 s (connect timeout)"


async def test_cancel_closes_the_http_stream(server):
    client = RemoteClient(Connection(server.url, model="endless", api_key=API_KEY))
    stream = client.submit([{"role": "user", "content": "hi"}])
    seen = 0
    async for event in stream:
        seen += bool(event.text)
        if seen == len(PARTIAL) + 2:
            stream.cancel()
    assert stream.finish_reason == "cancelled" and stream.error is None
    assert stream.text.startswith(PARTIAL_TEXT)
    await asyncio.wait_for(server.disconnected.wait(), 10)  # the server saw the client go
    await client.close()


async def test_leaving_the_loop_early_cancels(server):
    client = RemoteClient(Connection(server.url, model="endless", api_key=API_KEY))
    stream = client.submit([{"role": "user", "content": "hi"}])
    async for _ in stream:
        break
    await asyncio.wait_for(server.disconnected.wait(), 10)
    assert stream.finish_reason == "cancelled"
    await client.close()


async def test_cancel_before_the_request_ran(server):
    client = RemoteClient(Connection(server.url, model="ok", api_key=API_KEY))
    stream = client.submit([{"role": "user", "content": "hi"}])
    stream.cancel()
    assert await asyncio.wait_for(stream.result(), 10) == ""
    assert stream.finish_reason == "cancelled" and not server.requests
    await client.close()


async def test_list_models_and_its_failures(server):
    assert await list_models(Connection(server.url)) == ["ok", "drop"]
    assert await Connection(server.url).list_models() == ["ok", "drop"]
    with pytest.raises(RemoteError, match=r"cannot reach http://127\.0\.0\.1:\d+"):
        await list_models(Connection(f"http://127.0.0.1:{free_port()}"))
