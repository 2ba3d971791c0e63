"""A real API server on 127.0.0.1 (a free port) over a tiny-model engine, and the official
`openai` client pointed at it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from app.backend import LocalTarget
from app.server import ApiServer, ServerConfig
from tests.api_clients import openai_client

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
    client = openai_client(url + "/v1", api_key=config.get("api_key") or "unused",
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


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, tiny) -> Path:
    """The tiny model saved as an mlx-lm directory (a long context, for an endless stream),
    for `batchchat serve --model` as a real process."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    d = tmp_path_factory.mktemp("tinymodel")
    a = tiny.model.args
    config = {"model_type": "llama", "hidden_size": a.hidden_size,
              "num_hidden_layers": a.num_hidden_layers, "intermediate_size": a.intermediate_size,
              "num_attention_heads": a.num_attention_heads,
              "num_key_value_heads": a.num_key_value_heads, "rms_norm_eps": a.rms_norm_eps,
              "vocab_size": a.vocab_size, "rope_theta": a.rope_theta,
              "tie_word_embeddings": False, "max_position_embeddings": 100_000}
    (d / "config.json").write_text(json.dumps(config))
    mx.save_safetensors(str(d / "model.safetensors"), dict(tree_flatten(tiny.model.parameters())))
    tiny.tokenizer._tokenizer.save_pretrained(str(d))
    return d


@pytest.fixture(scope="module")
def loaded():
    """The bundled model, loaded once a module (the bundled-model server tests build their
    engines on it)."""
    from engine.loader import bundled_model_path, load_model

    return load_model(str(bundled_model_path()))
