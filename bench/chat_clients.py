"""Chat clients the multi-turn scenarios drive: the engine, mlx-lm's cached path, any
OpenAI-compatible server. Each answers one turn and says what it measured.

TTFT is the client's: from sending the turn to its first token (vLLM's definition), so
tokenizing and queueing are inside it on every side.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

from engine.engine import Engine

from .request_sampling import GREEDY_REQUESTS, RequestSampling


@dataclass(slots=True)
class Reply:
    text: str
    token_ids: list[int] | None  # what a BatchChat client hands back next turn; None over HTTP
    ttft_s: float
    e2e_s: float
    tokens: int
    prompt_tokens: int | None = None  # None where the peer does not say
    cached_tokens: int | None = None


class ChatClient(Protocol):
    name: str

    async def reply(self, messages: list[dict[str, Any]], max_tokens: int) -> Reply: ...


class EngineChat:
    """The engine, as the app's chat tabs use it: replies carry their generated ids."""

    name = "engine"

    def __init__(self, engine: Engine, priority: str = "interactive",
                 sampling: RequestSampling = GREEDY_REQUESTS) -> None:
        self.engine = engine
        self.priority = priority
        self.sampling = sampling

    async def reply(self, messages: list[dict[str, Any]], max_tokens: int) -> Reply:
        t0 = time.perf_counter()
        stream = self.engine.submit(messages=messages, priority=self.priority,
                                    params=self.sampling.params(max_tokens))
        first = None
        async for event in stream:
            if event.token is not None and first is None:
                first = time.perf_counter()
        end = time.perf_counter()
        if stream.finish_reason in ("error", "shutdown", "cancelled"):
            raise RuntimeError(f"engine request ended {stream.finish_reason}: {stream.error}")
        st = stream.stats
        return Reply(stream.text, list(stream.tokens), (first or end) - t0, end - t0,
                     len(stream.tokens), st.prompt_tokens if st else None,
                     st.cached_tokens if st else None)


class MlxLmCachedChat:
    """mlx-lm's own cached path for one conversation, as `mlx_lm.server` serves a single
    request: the templated text's ids, the nearest entry of an `LRUPromptCache` trimmed to
    the common prefix, `stream_generate` on the rest, the cache stored back under the
    prompt plus the generated ids. Runs on the caller's thread (one chat at a time)."""

    name = "mlx_lm"

    def __init__(self, model: Any, tokenizer: Any,
                 sampling: RequestSampling = GREEDY_REQUESTS) -> None:
        from mlx_lm.models.cache import LRUPromptCache

        self.model = model
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.cache = LRUPromptCache()

    async def reply(self, messages: list[dict[str, Any]], max_tokens: int) -> Reply:
        from mlx_lm import stream_generate
        from mlx_lm.models.cache import make_prompt_cache

        t0 = time.perf_counter()
        plain = [{"role": m["role"], "content": m["content"]} for m in messages]
        prompt = list(self.tokenizer.apply_chat_template(plain, add_generation_prompt=True))
        cache, rest = self.cache.fetch_nearest_cache("model", prompt)
        cached = len(prompt) - len(rest)
        if cache is None:
            cache, rest, cached = make_prompt_cache(self.model), prompt, 0
        key, first, text, n = prompt[:], None, [], 0
        for r in stream_generate(self.model, self.tokenizer, rest, max_tokens=max_tokens,
                                 prompt_cache=cache, **self.sampling.mlx_lm_kwargs()):
            if first is None:
                first = time.perf_counter()
            key.append(r.token)
            text.append(r.text)
            n += 1
            if r.finish_reason is not None:
                break
        end = time.perf_counter()
        self.cache.insert_cache("model", key, cache)
        return Reply("".join(text), None, (first or end) - t0, end - t0, n, len(prompt), cached)


class OpenAIChat:
    """Any OpenAI-compatible server (`/v1/chat/completions`, streamed), through aiohttp:
    mlx_lm.server, llama.cpp's server, BatchChat's own."""

    def __init__(self, url: str, model: str = "default", api_key: str | None = None,
                 name: str = "http", session: Any = None,
                 sampling: RequestSampling = GREEDY_REQUESTS) -> None:
        self.url = url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.name = name
        self.sampling = sampling
        self._session = session

    async def __aenter__(self) -> OpenAIChat:
        import aiohttp

        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=300))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._session.close()

    async def reply(self, messages: list[dict[str, Any]], max_tokens: int) -> Reply:
        from .http_client import HttpResult, Target, chat

        plain = [{"role": m["role"], "content": m["content"]} for m in messages]
        target = Target(self.name, f"{self.url}/v1", self.model, self.api_key)
        r = await chat(self._session, target, HttpResult(index=0, prompt=plain[-1]["content"]),
                       plain, max_tokens, time.perf_counter(), self.sampling.fields)
        if r.error:
            raise RuntimeError(f"{self.url}: {r.error}")
        return Reply(r.text, None, r.ttft_s or r.e2e_s or 0.0, r.e2e_s or 0.0,
                     r.output_tokens, r.prompt_tokens or None, r.cached_tokens)
