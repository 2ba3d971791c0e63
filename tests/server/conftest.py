"""A real API server on 127.0.0.1 (a free port) over a tiny-model engine, and the official
`openai` client pointed at it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from openai import AsyncOpenAI

from app.bridge import LocalTarget
from app.server import ApiServer, ServerConfig

MODEL = "tiny"


@dataclass
class Served:
    server: ApiServer
    engine: Any
    client: AsyncOpenAI
    url: str


@asynccontextmanager
async def serving(eng: Any, model: str = MODEL, on_finished: Any = None,
                  **config: Any) -> AsyncIterator[Served]:
    """Start `eng` and a server over it on a free port, with an openai client; all three
    end with the block."""
    await eng.start()
    target = LocalTarget(eng)  # the server reaches the engine through app.bridge
    server = ApiServer(lambda: target, lambda: model, ServerConfig(port=0, **config),
                       on_finished=on_finished)
    url = await server.start()
    client = AsyncOpenAI(base_url=url + "/v1", api_key=config.get("api_key") or "unused",
                         max_retries=0, timeout=60)
    try:
        yield Served(server, eng, client, url)
    finally:
        await client.close()
        await server.stop()
        await eng.shutdown()


@pytest.fixture
async def serve(make_engine) -> AsyncIterator[Callable[..., Any]]:
    """`await serve(engine={...EngineConfig}, on_finished=None, **ServerConfig)`: engine
    started, server up."""
    async with AsyncExitStack() as stack:
        async def start(engine: dict[str, Any] | None = None, on_finished: Any = None,
                        **config: Any) -> Served:
            return await stack.enter_async_context(
                serving(make_engine(**(engine or {})), on_finished=on_finished, **config))

        yield start


async def wait_for(predicate: Callable[[], bool], tries: int = 500) -> None:
    """Poll (bounded) until `predicate()` holds."""
    for _ in range(tries):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")
