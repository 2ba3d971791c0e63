"""One streamed chat request to any OpenAI-compatible server, timed as `vllm bench serve`
times it: TTFT = send -> first chunk with text; ITL = each gap between text chunks after it;
E2E = send -> end of stream; TPOT = (E2E - TTFT) / (output tokens - 1), output tokens from
the server's usage (stream_options.include_usage), else the count of text chunks."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from app.simulator.workload import RequestResult

from .request_sampling import GREEDY


@dataclass(slots=True)
class HttpResult(RequestResult):
    cached_tokens: int | None = None  # prompt tokens the server reused (None: not reported)
    turn: int = 0  # multi-turn: which turn of its conversation


@dataclass(frozen=True, slots=True)
class Target:
    name: str  # a label for the report ("batchchat", "mlx_lm.server")
    url: str  # the base URL, ending in /v1
    model: str  # the model id the server expects
    api_key: str | None = None


async def chat(session: aiohttp.ClientSession, target: Target, result: HttpResult,
               messages: list[dict[str, str]], max_tokens: int, t0: float,
               sampling: dict[str, Any] | None = None) -> HttpResult:
    """Stream one chat completion into `result` (also returned); `t0` = the run's start;
    `sampling`: the request's sampling fields (default GREEDY)."""
    body = {"model": target.model, "messages": messages, "max_tokens": max_tokens,
            **(GREEDY if sampling is None else sampling),
            "stream": True, "stream_options": {"include_usage": True}}
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    sent = time.perf_counter()
    result.send_t = sent - t0
    last: float | None = None
    chunks, parts = 0, []
    usage: dict[str, Any] | None = None
    try:
        async with session.post(f"{target.url}/chat/completions", json=body,
                                headers=headers) as response:
            if response.status != 200:
                result.error = f"HTTP {response.status}: {(await response.text())[:200]}"
                result.finish_reason = "error"
                return result
            async for raw in response.content:  # one SSE line at a time
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                chunk = json.loads(data)
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices") or ():
                    text = (choice.get("delta") or {}).get("content") or ""
                    now = time.perf_counter()
                    if text:
                        if last is None:
                            result.ttft_s = now - sent
                        else:
                            result.itl_s.append(now - last)
                        last = now
                        chunks += 1
                        parts.append(text)
                    if choice.get("finish_reason"):
                        result.finish_reason = choice["finish_reason"]
    except (aiohttp.ClientError, ValueError) as exc:
        result.error, result.finish_reason = f"{type(exc).__name__}: {exc}", "error"
        return result
    result.e2e_s = time.perf_counter() - sent
    result.text = "".join(parts)
    result.output_tokens = int(usage["completion_tokens"]) if usage else chunks
    result.prompt_tokens = int(usage["prompt_tokens"]) if usage else 0
    cached = ((usage or {}).get("prompt_tokens_details") or {}).get("cached_tokens")
    result.cached_tokens = int(cached) if cached is not None else None
    return result
