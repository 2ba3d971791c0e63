"""An OpenAI-style server on loopback whose replies the test chooses: each chat request
streams the next text of `replies` (in a few chunks), for UI tests that need replies the
tiny random model cannot write (tall Markdown, say)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web


def _chunk(text: str | None = None, finish: str | None = None) -> bytes:
    delta = {"content": text} if text is not None else {}
    event = {"object": "chat.completion.chunk",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(event)}\n\n".encode()


class ScriptedServer:
    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.app = web.Application()
        self.app.router.add_get("/v1/models", self._models)
        self.app.router.add_post("/v1/chat/completions", self._chat)
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        self.runner = web.AppRunner(self.app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def _models(self, _request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "scripted"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(await request.json())
        text = self.replies[(len(self.requests) - 1) % len(self.replies)]
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        step = max(1, len(text) // 4)
        for start in range(0, len(text), step):
            await resp.write(_chunk(text[start:start + step]))
        await resp.write(_chunk(None, "stop"))
        await resp.write(b"data: [DONE]\n\n")
        return resp
