"""OpenAI's Responses API on the bundled SmolLM2-135M (a real model with an end token),
through the official `openai` SDK on loopback: a greedy response completes and is, token
for token, the answer /v1/chat/completions gives to the same conversation (one road);
streamed through the SDK's helper it is the same; continued by previous_response_id it is
the answer to the whole conversation sent again."""

from __future__ import annotations

import pytest

from tests.server.conftest import serving

pytestmark = pytest.mark.bundled

MODEL = "smollm2"
SYSTEM = "You are a helpful assistant."
QUESTION = "What is the capital of France?"


@pytest.fixture
async def s(loaded):
    from engine import Engine, EngineConfig

    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                    context_length=loaded.context_length, config=EngineConfig(max_concurrent=4))
    async with serving(engine, model=MODEL) as served:
        yield served


async def test_a_response_is_the_chat_completions_answer(s) -> None:
    body = dict(model=MODEL, instructions=SYSTEM, input=QUESTION, max_output_tokens=120,
                temperature=0)
    r = await s.client.responses.create(**body)
    assert r.status == "completed" and r.usage.output_tokens < 120
    assert "Paris" in r.output_text
    chat = await s.client.chat.completions.create(
        model=MODEL, max_tokens=120, temperature=0,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}])
    assert chat.choices[0].message.content == r.output_text
    assert chat.choices[0].finish_reason == "stop"
    assert chat.usage.completion_tokens == r.usage.output_tokens
    assert chat.usage.prompt_tokens == r.usage.input_tokens
    async with s.client.responses.stream(**body) as stream:
        streamed = "".join([ev.delta async for ev in stream
                            if ev.type == "response.output_text.delta"])
        final = await stream.get_final_response()
    assert streamed == r.output_text and final.output_text == r.output_text
    # continued by id: the answer to the whole conversation sent again
    follow = "And of Germany?"
    nxt = await s.client.responses.create(model=MODEL, instructions=SYSTEM, input=follow,
                                          previous_response_id=r.id, max_output_tokens=120,
                                          temperature=0)
    again = await s.client.chat.completions.create(
        model=MODEL, max_tokens=120, temperature=0,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION},
                  {"role": "assistant", "content": r.output_text},
                  {"role": "user", "content": follow}])
    assert nxt.output_text == again.choices[0].message.content
