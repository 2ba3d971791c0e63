"""GET /openapi.json and the validator agree where they did not (issue #46, item 12): the
served document names the served model (an enum a client or a fuzzer can pick from), an
empty completion prompt and empty call arguments are served as the document allows, and a
tool description that is not a string is refused whatever its type. A real server on
loopback, the official openai client."""

from __future__ import annotations

import aiohttp
import openai
import pytest

from tests.server.conftest import MODEL

PATHS = ("/v1/chat/completions", "/v1/completions")


async def model_field(url: str, path: str) -> dict:
    async with aiohttp.ClientSession() as http, http.get(url + "/openapi.json") as r:
        doc = await r.json()
    request = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    return request["schema"]["properties"]["model"]


@pytest.mark.parametrize("strict", [False, True])
async def test_the_served_document_names_the_served_model(serve, strict):
    s = await serve(strict_model_name=strict)
    for path in PATHS:
        field = await model_field(s.url, path)
        if strict:  # exactly the names that work
            assert field["enum"] == [MODEL]
        else:  # those first, and any other name (one model is served)
            assert field["anyOf"] == [{"enum": [MODEL]}, {"type": "string", "minLength": 1}]


async def test_an_empty_prompt_is_completed(serve):
    s = await serve()
    reply = await s.client.completions.create(model=MODEL, prompt="", max_tokens=3)
    assert reply.usage.completion_tokens == 3 and reply.usage.prompt_tokens == 1
    stream = await s.client.completions.create(model=MODEL, prompt="", max_tokens=3,
                                               stream=True)
    assert [c.choices[0].finish_reason async for c in stream if c.choices][-1] == "length"


async def test_empty_call_arguments_are_no_arguments(serve):
    s = await serve()
    reply = await s.client.chat.completions.create(model=MODEL, max_tokens=2, messages=[
        {"role": "user", "content": "what time is it?"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "c1", "type": "function", "function": {"name": "now", "arguments": ""}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"}])
    assert reply.usage.completion_tokens == 2


@pytest.mark.parametrize("description", [{}, [], 5, False, {"text": "x"}])
async def test_a_tool_description_that_is_not_a_string_is_refused(serve, description):
    s = await serve()
    with pytest.raises(openai.BadRequestError) as caught:
        await s.client.chat.completions.create(
            model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "f",
                                                     "description": description}}])
    assert caught.value.body["param"] == "tools[0].function.description"
