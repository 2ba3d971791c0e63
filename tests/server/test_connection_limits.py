"""Request bodies that never end, and more connections than the server takes (issue #46,
item 6): a body that stops (a Content-Length larger than what is sent, or one chunk and then
silence) gets a 408 and its connection closes after `body_timeout_s`; connections beyond
`max_connections` get a 503 and are closed at once while /health still answers; each
condition logs one line, not one per connection. Raw sockets on loopback."""

from __future__ import annotations

import asyncio
import json
import logging

import aiohttp

from tests.server.conftest import MODEL

HEAD = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\n")
BODY = json.dumps({"model": MODEL, "max_tokens": 2,
                   "messages": [{"role": "user", "content": "hi"}]}).encode()


def stalled_request(chunked: bool) -> bytes:
    """A request head and the start of a body that never ends."""
    if chunked:  # one chunk, then silence (no terminating zero-size chunk)
        return HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (10, BODY[:10])
    return HEAD + b"Content-Length: %d\r\n\r\n" % (len(BODY) + 100) + BODY  # 100 short


async def open_stalled(url: str, chunked: bool) -> tuple[asyncio.StreamReader,
                                                         asyncio.StreamWriter]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(stalled_request(chunked))
    await writer.drain()
    return reader, writer


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 bound_s: float = 20.0) -> tuple[int, dict]:
    """Everything the server sends until it closes (bounded: a server that never closes
    fails the test): the status and the JSON body."""
    try:
        raw = await asyncio.wait_for(reader.read(), bound_s)
    except TimeoutError:
        raise AssertionError("the server never closed the connection") from None
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def lines(caplog, text: str) -> int:
    return sum(text in r.getMessage() for r in caplog.records)


async def test_a_body_that_never_ends_gets_a_408_and_is_closed(serve, caplog):
    s = await serve(body_timeout_s=0.5)
    caplog.set_level(logging.INFO, logger="app.server.connection")
    stalled = [await open_stalled(s.url, chunked=i % 2 == 0) for i in range(10)]
    answers = await asyncio.gather(*[answer(r, w) for r, w in stalled])
    for status, body in answers:
        assert status == 408, body
        assert body["error"]["code"] == "request_timeout"
        assert "did not arrive within 0.5 s" in body["error"]["message"]
    assert not [r for r in caplog.records if r.exc_info]
    # ten connections closed, one log line for them all
    assert lines(caplog, "request body did not arrive") == 1
    # a request whose body does come is served as before
    reply = await s.client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert reply.usage.completion_tokens == 2


async def test_connections_beyond_the_cap_are_refused_and_health_still_answers(serve,
                                                                             caplog):
    cap = 20
    s = await serve(max_connections=cap, body_timeout_s=3.0)
    caplog.set_level(logging.INFO, logger="app.server.connection")
    async with aiohttp.ClientSession() as http:  # one keep-alive connection, opened first
        async with http.get(s.url + "/health") as r:
            assert r.status == 200
        stalled = [await open_stalled(s.url, chunked=i % 2 == 0) for i in range(cap + 10)]
        await asyncio.sleep(0.2)  # the server has accepted them all
        async with http.get(s.url + "/health") as r:  # over the connection it already has
            assert r.status == 200 and await r.json() == {"status": "ok"}
        answers = await asyncio.gather(*[answer(r, w) for r, w in stalled])
    statuses = [status for status, _ in answers]
    # the first ones hold the places left (the health check's connection takes one) until
    # their bodies time out; the rest are refused at once
    assert statuses == [408] * (cap - 1) + [503] * 11, statuses
    refusal = answers[-1][1]["error"]
    assert refusal["code"] == "too_many_connections" and f"{cap} connections" in \
        refusal["message"]
    assert lines(caplog, "refused a connection") == 1  # 11 refused, one line
    assert lines(caplog, "request body did not arrive") == 1
    # with the stalled ones gone, new connections are served again
    async with aiohttp.ClientSession() as http, http.get(s.url + "/health") as r:
        assert r.status == 200
