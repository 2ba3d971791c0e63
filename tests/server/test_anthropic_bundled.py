"""Anthropic's Messages API on the bundled SmolLM2-135M (a real model with an end token),
through the official `anthropic` SDK on loopback: a greedy answer ends its turn
(`end_turn`) and is, token for token, the answer /v1/chat/completions gives to the same
conversation (one road); streamed it is the same; a forced call validates against its
schema and its result goes back for an answer."""

from __future__ import annotations

import jsonschema
import pytest

from tests.api_clients import anthropic_client
from tests.server.conftest import serving

pytestmark = pytest.mark.bundled

MODEL = "smollm2"
GREEDY = {"temperature": 0}
SYSTEM = "You are a helpful assistant."
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
WEATHER = {"name": "get_weather", "description": "The current weather in a city",
           "input_schema": {"type": "object", "properties": {
               "city": {"type": "string", "minLength": 1, "maxLength": 30},
               "unit": {"enum": ["celsius", "fahrenheit"]}},
               "required": ["city", "unit"], "additionalProperties": False}}


@pytest.fixture
async def s(loaded):
    from engine import Engine, EngineConfig

    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                    context_length=loaded.context_length, config=EngineConfig(max_concurrent=4))
    async with serving(engine, model=MODEL) as served:
        yield served


async def test_an_answer_ends_its_turn_as_chat_completions_answers(s) -> None:
    async with anthropic_client(s.url, api_key="unused", max_retries=0) as client:
        r = await client.messages.create(model=MODEL, max_tokens=120, system=SYSTEM,
                                         messages=QUESTION, extra_body=GREEDY)
        async with client.messages.stream(model=MODEL, max_tokens=120, system=SYSTEM,
                                          messages=QUESTION, extra_body=GREEDY) as stream:
            streamed = "".join([t async for t in stream.text_stream])
            final = await stream.get_final_message()
    assert r.stop_reason == "end_turn" and r.usage.output_tokens < 120
    text = r.content[0].text
    assert "Paris" in text and streamed == text and final.stop_reason == "end_turn"
    openai = await s.client.chat.completions.create(
        model=MODEL, max_tokens=120, temperature=0,
        messages=[{"role": "system", "content": SYSTEM}, *QUESTION])
    assert openai.choices[0].message.content == text
    assert openai.choices[0].finish_reason == "stop"
    assert openai.usage.completion_tokens == r.usage.output_tokens
    assert openai.usage.prompt_tokens == \
        r.usage.input_tokens + r.usage.cache_read_input_tokens


async def test_a_forced_call_and_its_result(s) -> None:
    async with anthropic_client(s.url, api_key="unused", max_retries=0) as client:
        ask = [{"role": "user", "content": "What is the weather in Paris?"}]
        r = await client.messages.create(
            model=MODEL, max_tokens=120, tools=[WEATHER], messages=ask, extra_body=GREEDY,
            tool_choice={"type": "tool", "name": "get_weather"})
        assert r.stop_reason == "tool_use"
        call = r.content[-1]
        assert call.type == "tool_use" and call.name == "get_weather"
        jsonschema.validate(call.input, WEATHER["input_schema"])
        turn = ask + [
            {"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                              for b in r.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                          "content": "Sunny, 24 degrees."}]}]
        after = await client.messages.create(model=MODEL, max_tokens=80, tools=[WEATHER],
                                             messages=turn, extra_body=GREEDY,
                                             tool_choice={"type": "none"})
    assert after.stop_reason in ("end_turn", "max_tokens")
    assert [b.type for b in after.content] == ["text"] and after.content[0].text.strip()
