"""`RemoteStream`: one streamed chat completion from an OpenAI-compatible server, shaped as
the engine's `RequestStream` so conversations, the engine bridge and the simulator take it
as it is. Timing is measured here, on the client.

Differences a consumer may notice: the server sends text, not token ids, so each event that
carries text has `token == -1` (one per streamed chunk) and `tokens` stays empty (a reply's
ids are never handed back to a local engine as if they were its own); `prompt_tokens` is
empty until the end, and the final `stats` take token counts from the server's `usage` chunk
when it sends one (else the count of text chunks).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from engine.public import EventStream, RequestStats, TokenEvent

from .body import chat_body
from .errors import RemoteError, describe_exception, describe_status, server_message
from .sse import DONE, MalformedStream, sse_payloads

if TYPE_CHECKING:
    from engine.public import SamplingParams

    from .connection import Connection
    from .limiter import Limiter

PLACEHOLDER_TOKEN = -1  # stands for "a chunk of text arrived"; never a real id


class RemoteStream(EventStream):
    """Events of one remote request, in order. Leaving `async for` early (or `cancel()`)
    closes the HTTP stream; the final event always comes (finish_reason "cancelled")."""

    def __init__(self, request_id: str, conn: Connection, session: aiohttp.ClientSession,
                 messages: Sequence[Mapping[str, Any]], params: SamplingParams, *,
                 priority: str = "interactive", tag: str | None = None,
                 limiter: Limiter | None = None,
                 extra_body: Mapping[str, Any] | None = None) -> None:
        # prompt_tokens and tokens stay empty: ids are the server's (module docstring)
        super().__init__(request_id, [])
        self.connection = conn
        self.chunks = 0  # text chunks received
        self.usage: dict[str, Any] = {}  # the server's usage chunk, if it sent one
        self._params = params
        self._priority = priority
        self._tag = tag
        self._limiter = limiter
        self._body = chat_body(conn.model, messages, params) | dict(extra_body or {})
        self._session = session
        self._cancel_asked = False
        self._t_submit = time.perf_counter()
        self._t_admit: float | None = None
        self._t_first: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._server_finish: str | None = None  # the finish_reason the server sent
        # the reply's tool calls (OpenAI's shape), put together from the streamed deltas
        self.tool_calls: list[dict[str, Any]] = []
        # a reasoning model's thinking, from the server's reasoning_content (llama.cpp,
        # this server) or reasoning (vLLM) deltas: apart from the text
        self._reasoning: list[str] = []

    @property
    def reasoning(self) -> str:
        """The reply's thinking so far ("" from a server or model that sends none)."""
        if len(self._reasoning) > 1:
            self._reasoning[:] = ["".join(self._reasoning)]
        return self._reasoning[0] if self._reasoning else ""

    def cancel(self) -> None:
        """Close the HTTP stream; the request ends with finish_reason "cancelled"."""
        if self.finished or self._cancel_asked:
            return
        self._cancel_asked = True
        if self._task is not None:
            self._task.cancel()

    # -- driving the request ---------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> RemoteStream:
        """Begin on `loop` or the running one (the client calls this right after building
        it)."""
        self._task = (loop or asyncio.get_running_loop()).create_task(self._run())
        self._task.add_done_callback(self._task_done)
        return self

    def _task_done(self, task: asyncio.Task[None]) -> None:
        # Whatever ended the task (even a cancel before it ever ran), the stream ends.
        if self.finished:
            return
        if task.cancelled():
            self._finish("cancelled")
        else:
            exc = task.exception()
            self._finish("error", f"{self.connection.name}: {type(exc).__name__}: {exc}")

    async def _run(self) -> None:
        conn = self.connection
        admitted = False
        try:
            if self._limiter is not None:
                await self._limiter.acquire()
                admitted = True
            # queue_s: the wait for a slot under the client's own limit (none: 0)
            self._t_admit = time.perf_counter() if admitted else self._t_submit
            finish = await self._request()
            self._finish(finish)
        except asyncio.CancelledError:
            self._finish("cancelled")
            if not self._cancel_asked:
                raise  # someone else cancelled the task (loop shutting down): pass it on
        except RemoteError as exc:
            self._finish("error", str(exc))
        except (MalformedStream, aiohttp.ClientError, HttpProcessingError, TimeoutError) as exc:
            if self._server_finish is not None:  # the reply was complete; only the trailer
                self._finish(self._server_finish)  # (usage, [DONE]) went wrong
            elif isinstance(exc, MalformedStream):
                self._finish("error", f"{conn.name}: {exc}")
            else:
                self._finish("error", describe_exception(conn, exc))
        finally:
            if admitted and self._limiter is not None:
                self._limiter.release()

    async def _request(self) -> str:
        """POST and read the stream; the finish reason, or raise."""
        conn = self.connection
        async with self._session.post(conn.url("chat/completions"), json=self._body,
                                      headers=conn.headers(), timeout=conn.timeout()) as resp:
            if resp.status != 200:
                raise RemoteError(describe_status(conn, resp.status, await resp.text(),
                                                  resp.headers))
            if resp.content_type != "text/event-stream":
                raise RemoteError(f"{conn.name}: answered with {resp.content_type or 'no type'}"
                                  ", not an event stream (is this an OpenAI-compatible "
                                  "chat completions endpoint?)")
            done = False
            async for payload in sse_payloads(resp):
                if payload is DONE:
                    done = True
                    break
                assert isinstance(payload, dict)
                self._server_finish = self._on_chunk(payload) or self._server_finish
            if self._server_finish is None and not done:
                raise RemoteError(f"{conn.name}: the server dropped the connection mid-reply "
                                  "(the stream ended without a finish reason)")
            return self._server_finish or "stop"

    def _on_chunk(self, chunk: dict[str, Any]) -> str | None:
        if "error" in chunk:  # vLLM and others report mid-stream failures as a data event
            raise RemoteError(f"{self.connection.name}: the server failed mid-reply: "
                              f"{server_message(json.dumps(chunk))}")
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = chunk.get("choices", [] if isinstance(usage, dict) else None)
        if not isinstance(choices, list):
            raise MalformedStream(f"malformed chunk (no choices list): {str(chunk)[:80]!r}")
        finish = None
        for choice in choices[:1]:  # n = 1
            delta = (choice.get("delta") or {}) if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                raise MalformedStream(f"malformed chunk (bad choice): {str(chunk)[:80]!r}")
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str) and thought:
                self._on_reasoning(thought)
            text = delta.get("content")
            if text:
                self._on_text(str(text))
            if isinstance(delta.get("tool_calls"), list):
                self._on_tool_deltas(delta["tool_calls"])
            finish = choice.get("finish_reason") or None
        return finish

    def _on_tool_deltas(self, deltas: list[Any]) -> None:
        """OpenAI streams a call as pieces by `index`: its id and name first, then its
        arguments' text in parts."""
        for d in deltas:
            if not isinstance(d, dict):
                raise MalformedStream(f"malformed tool call delta: {str(d)[:80]!r}")
            index = d.get("index", len(self.tool_calls))
            if not isinstance(index, int) or not 0 <= index <= len(self.tool_calls):
                raise MalformedStream(f"tool call delta out of order: {str(d)[:80]!r}")
            if index == len(self.tool_calls):
                self.tool_calls.append({"id": "", "type": "function",
                                        "function": {"name": "", "arguments": ""}})
            call = self.tool_calls[index]
            fn = d.get("function") if isinstance(d.get("function"), dict) else {}
            if isinstance(d.get("id"), str):
                call["id"] = d["id"]
            if isinstance(fn.get("name"), str):
                call["function"]["name"] += fn["name"]
            if isinstance(fn.get("arguments"), str):
                call["function"]["arguments"] += fn["arguments"]
        if self._t_first is None:
            self._t_first = time.perf_counter()

    def _on_reasoning(self, text: str) -> None:
        """A piece of the thinking: a chunk (it counts as one, as text does) whose event
        carries no text, so the views take the thinking from `reasoning`."""
        if self._t_first is None:
            self._t_first = time.perf_counter()
        self.chunks += 1
        self._reasoning.append(text)
        self._queue(TokenEvent(self.request_id, PLACEHOLDER_TOKEN, ""))

    def _on_text(self, text: str) -> None:
        if self._t_first is None:
            self._t_first = time.perf_counter()
        self.chunks += 1
        self._parts.append(text)
        self._queue(TokenEvent(self.request_id, PLACEHOLDER_TOKEN, text))

    def _finish(self, reason: str, error: str | None = None) -> None:
        if self.finished:
            return
        self.finish_reason, self.error = reason, error
        self.stats = self._make_stats()
        self._queue(TokenEvent(self.request_id, None, "", reason, error, self.stats))

    def _make_stats(self) -> RequestStats:
        end = time.perf_counter()
        usage = self.usage
        generated = _int(usage.get("completion_tokens"), self.chunks)
        prompt = _int(usage.get("prompt_tokens"), 0)
        details = usage.get("prompt_tokens_details")
        cached = _int(details.get("cached_tokens"), 0) if isinstance(details, dict) else 0
        first = self._t_first
        decode_s = end - first if first is not None else 0.0
        admit = self._t_admit if self._t_admit is not None else end
        return RequestStats(
            request_id=self.request_id, tag=self._tag, priority=self._priority,
            queue_s=admit - self._t_submit, prompt_tokens=prompt,
            ttft_s=first - self._t_submit if first is not None else None,
            generated_tokens=generated, decode_s=decode_s,
            tokens_per_s=(generated - 1) / decode_s if generated > 1 and decode_s > 0 else 0.0,
            e2e_s=end - self._t_submit, finish_reason=self.finish_reason or "unknown",
            seed=self._params.seed if self._params.seed is not None else -1,
            error=self.error, cached_tokens=cached,
        )


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
