"""A deliberately misbehaving OpenAI-style server on loopback, for the failure tests.

The request's `model` picks the behaviour, so one server covers every case."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

API_KEY = "right-key"
PARTIAL = ["Hello", " there", ","]  # what the misbehaving streams send before failing
LONG_LINE = 2_000_000  # bytes: past the client's line limit (aiohttp 3.14: 512 KiB)


def chunk(text: str | None = None, finish: str | None = None) -> bytes:
    delta = {"content": text} if text is not None else {}
    event = {"object": "chat.completion.chunk",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(event)}\n\n".encode()


class BrokenServer:
    def __init__(self) -> None:
        self.disconnected = asyncio.Event()  # a streaming client went away
        self.requests: list[dict[str, Any]] = []
        self.app = web.Application()
        self.app.router.add_get("/v1/models", self.models)
        self.app.router.add_post("/v1/chat/completions", self.chat)
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        self.runner = web.AppRunner(self.app, handler_cancellation=True)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "ok"}, {"id": "drop"}]})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        model = body["model"]
        if request.headers.get("Authorization") != f"Bearer {API_KEY}":
            return web.json_response({"error": {"message": "Invalid API key"}}, status=401)
        if model == "missing":
            return web.json_response({"error": {"message": "The model `missing` does not "
                                                           "exist."}}, status=404)
        if model == "busy":
            return web.json_response({"error": "rate limited"}, status=429,
                                     headers={"Retry-After": "7"})
        if model == "boom":
            return web.Response(text="Internal Server Error: out of memory", status=500)
        if model == "json":  # ignores stream=True
            return web.json_response({"choices": [{"message": {"content": "hi"}}]})
        if model == "usage-only":  # a usage chunk without the choices key still parses
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(chunk("hi"))
            await resp.write(chunk(None, "stop"))
            await resp.write(b'data: {"usage": {"prompt_tokens": 2, "completion_tokens": 1}}'
                             b"\n\ndata: [DONE]\n\n")
            return resp
        if model == "idle":  # never answers at all
            await asyncio.sleep(3600)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for text in PARTIAL:
            await resp.write(chunk(text))
        if model == "drop":  # the connection dies mid-reply (no finish, no [DONE])
            request.transport.close()  # type: ignore[union-attr]
            return resp
        if model == "malformed":
            await resp.write(b'data: {"choices": [{"delta": {"content": "x"\n\n')
            return resp
        if model == "midfail":  # vLLM's way to report a failure after the stream began
            await resp.write(b'data: {"error": {"message": "engine died", "code": 500}}\n\n')
            return resp
        if model == "no-trailer":  # finishes, then hangs before usage and [DONE]
            await resp.write(chunk(None, "length"))
            await asyncio.sleep(3600)
        if model == "long-line":  # one event line past the client's line limit
            await resp.write(b"data: " + b"x" * LONG_LINE + b"\n\n")
            return resp
        if model == "bad-choice":
            await resp.write(b'data: {"choices": ["x"]}\n\n')
            return resp
        if model == "stall":  # starts, then goes silent
            await asyncio.sleep(3600)
        if model == "endless":  # streams until the client goes away
            try:
                while True:
                    await resp.write(chunk("."))
                    await asyncio.sleep(0.02)
            except (ConnectionResetError, asyncio.CancelledError):
                self.disconnected.set()
                raise
        await resp.write(chunk(None, "stop"))
        usage = {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 4,
                                          "prompt_tokens_details": {"cached_tokens": 3}}}
        await resp.write(f"data: {json.dumps(usage)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        return resp


async def start_eof_server() -> tuple[asyncio.Server, str]:
    """An HTTP/1.0-style server (as mlx_lm.server is: no chunked encoding, the body ends
    when the connection closes) that closes cleanly mid-reply: a drop the HTTP layer cannot
    see, only the missing finish reason shows it."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        await reader.readexactly(length)
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
                     + b"".join(chunk(t) for t in PARTIAL))
        await writer.drain()
        writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    return srv, f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"


async def start_not_http_server(answer: bytes = b"SSH-2.0-OpenSSH_9.6\r\n"
                                ) -> tuple[asyncio.Server, str]:
    """A server on loopback that answers every connection with bytes that are not HTTP
    (an SSH server's greeting), then closes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(answer)
        await writer.drain()
        writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    return srv, f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
