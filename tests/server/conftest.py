"""A real API server on 127.0.0.1 (a free port) over a tiny-model engine, and the official
`openai` client pointed at it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
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


@pytest.fixture
async def serve(make_engine) -> AsyncIterator[Callable[..., Any]]:
    """`await serve(engine={...EngineConfig}, on_finished=None, **ServerConfig)`: engine
    started, server up."""
    running: list[Served] = []

    async def start(engine: dict[str, Any] | None = None, on_finished: Any = None,
                    **config: Any) -> Served:
        eng = make_engine(**(engine or {}))
        await eng.start()
        target = LocalTarget(eng)  # the server reaches the engine through app.bridge
        server = ApiServer(lambda: target, lambda: MODEL, ServerConfig(port=0, **config),
                           on_finished=on_finished)
        url = await server.start()
        client = AsyncOpenAI(base_url=url + "/v1", api_key=config.get("api_key") or "unused",
                             max_retries=0, timeout=60)
        running.append(Served(server, eng, client, url))
        return running[-1]

    yield start
    for s in running:
        await s.client.close()
        await s.server.stop()
        await s.engine.shutdown()


async def wait_for(predicate: Callable[[], bool], tries: int = 500) -> None:
    """Poll (bounded) until `predicate()` holds."""
    for _ in range(tries):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")
