"""A streaming client that leaves before its stream ends (issue #46, item 13): the server
logs no traceback (it wrote to a socket the client had reset: aiohttp raised
ClientConnectionResetError from `write` or `write_eof`, and logged it as a 500 it could not
send). Raw sockets on loopback, closed with a reset as a client that is killed does."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct

from tests.server.conftest import MODEL, wait_for

CLIENTS = 12


def read_then_reset(port: int, events: int, n: int) -> int:
    """Ask for a long stream, read `events` of its SSE events, close with a reset."""
    body = json.dumps({"model": MODEL, "prompt": "hi", "max_tokens": 300, "n": n,
                       "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        got = b""
        while got.count(b"data: ") < events:
            chunk = sock.recv(4096)
            assert chunk, "the server ended the stream early"
            got += chunk
        # linger 0: close() sends a reset, as a killed client's socket does
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return len(got)


async def test_clients_that_leave_mid_stream_log_no_traceback(serve, caplog):
    s = await serve(engine={"context_length": 100_000})
    caplog.set_level(logging.DEBUG)
    for n in (2, 3, 2, 3, 2, 1):  # n > 1: writes in a row, the second to a reset socket
        await asyncio.gather(*[asyncio.to_thread(read_then_reset, s.server.port, 3 + 7 * i, n)
                               for i in range(CLIENTS)])
        await wait_for(lambda: not s.server._streams, tries=2000)
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert not tracebacks, [f"{r.name}: {r.getMessage()} {r.exc_info[1]!r}"
                            for r in tracebacks[:3]]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING
                and "Error handling request" in r.getMessage()]
    # and the server carries on
    reply = await s.client.completions.create(model=MODEL, prompt="hi", max_tokens=3)
    assert reply.usage.completion_tokens == 3
