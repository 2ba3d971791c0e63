"""The `model` a request may send (issue #46, item 26): with one model served, any name (as
llama-server), the reply naming the served id; with --strict-model-name, the id, the file
name with or without .gguf and the repo id, case aside, and a 404 listing them for any other.
A real server on loopback, the official openai client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
import pytest
from openai import AsyncOpenAI

from app.backend import LocalTarget
from app.server import ApiServer, ServerConfig
from app.server.model_names import aliases_of
from tests.api_clients import openai_client

SERVED = "SmolLM2-135M-Instruct"
SOURCE = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def client(make_engine, request) -> AsyncIterator[AsyncOpenAI]:
    """A server on the tiny engine that calls it SERVED, loaded from SOURCE; strict or not
    as the test's parameter says."""
    engine = make_engine()
    await engine.start()
    target = LocalTarget(engine)
    server = ApiServer(lambda: target, lambda: SERVED,
                       ServerConfig(port=0, strict_model_name=request.param),
                       model_aliases=lambda: aliases_of(SOURCE))
    url = await server.start()
    async with openai_client(url + "/v1", api_key="unused", max_retries=0) as c:
        try:
            yield c
        finally:
            await server.stop()
            await engine.shutdown()


@pytest.mark.parametrize("client", [False], indirect=True)
@pytest.mark.parametrize("asked", ["gpt-4o", "SmolLM2-135M-Instruct.Q4_1.gguf", "x"])
async def test_one_model_served_takes_any_name_and_answers_with_its_id(client, asked):
    chat = await client.chat.completions.create(model=asked, messages=MESSAGES, max_tokens=2)
    assert chat.model == SERVED
    text = await client.completions.create(model=asked, prompt="hi", max_tokens=2)
    assert text.model == SERVED
    stream = await client.chat.completions.create(model=asked, messages=MESSAGES,
                                                  max_tokens=2, stream=True)
    assert {chunk.model async for chunk in stream} == {SERVED}


@pytest.mark.parametrize("client", [True], indirect=True)
@pytest.mark.parametrize("asked", [SERVED, "smollm2-135m-instruct",
                                   "SmolLM2-135M-Instruct.Q4_1.gguf",
                                   "SmolLM2-135M-Instruct.Q4_1"])
async def test_strict_takes_the_id_and_the_file_name(client, asked):
    chat = await client.chat.completions.create(model=asked, messages=MESSAGES, max_tokens=2)
    assert chat.model == SERVED


@pytest.mark.parametrize("client", [True], indirect=True)
async def test_strict_refuses_another_name_listing_the_names_that_work(client):
    with pytest.raises(openai.NotFoundError) as caught:
        await client.chat.completions.create(model="gpt-4o", messages=MESSAGES, max_tokens=2)
    error = caught.value.body
    assert error["param"] == "model" and error["code"] == "model_not_found"
    for name in (SERVED, "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q4_1"):
        assert f"'{name}'" in error["message"]


def test_aliases_of_each_kind_of_source():
    assert aliases_of("HuggingFaceTB/SmolLM2-135M-Instruct") == (
        "HuggingFaceTB/SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct")
    assert aliases_of("/m/qwen2.5-0.5b-q4_k_m.gguf") == ("qwen2.5-0.5b-q4_k_m.gguf",
                                                        "qwen2.5-0.5b-q4_k_m")
    assert aliases_of("/m/mlx-dir") == ("mlx-dir",)
    assert aliases_of("bundled")[0] == "bundled" and \
        aliases_of("bundled")[1].endswith(".gguf")
