"""An OpenAI-style server on loopback that answers like a model calling tools: the first
turn streams some text and two parallel calls (get_weather, add) as `tool_calls` deltas;
a turn whose last message is a tool result streams a plain answer. The requests it got are
kept, so a test can see what the app sent back."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from tests.remote.broken_server import BrokenServer

CALLS = [
    {"id": "call_weather", "type": "function",
     "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
    {"id": "call_add", "type": "function",
     "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}},
]
TEXT = "Let me look."
ANSWER = "Oslo is sunny."


def _event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {"object": "chat.completion.chunk",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


class ToolCallServer(BrokenServer):
    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if body["messages"][-1]["role"] == "tool":
            await resp.write(_event({"content": ANSWER}))
            await resp.write(_event({}, "stop"))
        else:
            await resp.write(_event({"content": TEXT}))
            for i, call in enumerate(CALLS):  # id and name first, the arguments in two parts
                fn, args = call["function"], call["function"]["arguments"]
                await resp.write(_event({"tool_calls": [
                    {"index": i, "id": call["id"], "type": "function",
                     "function": {"name": fn["name"], "arguments": args[:5]}}]}))
                await resp.write(_event({"tool_calls": [
                    {"index": i, "function": {"arguments": args[5:]}}]}))
            await resp.write(_event({}, "tool_calls"))
        await resp.write(b"data: [DONE]\n\n")
        return resp
