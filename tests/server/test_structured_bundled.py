"""Structured output and tools on the bundled SmolLM2-135M, through the official openai
client against a real server on loopback (issue #30's done-when): 20 prompts under a
non-trivial JSON schema, run at once (one batch), every reply validates with jsonschema;
json_object replies parse; `required` calls over two tools validate against their
parameters; a named function forces that function; streamed deltas reassemble into the
non-streamed calls of the same seed; a tool result goes back to the model; `auto` on a
prompt the model answers in text gives content; free replies in a batch with constrained
ones are exactly those of the same requests without them. Its template has no tool support, so the
tools go in through the fallback section (docs/server.md)."""

from __future__ import annotations

import asyncio
import json

import jsonschema
import pytest

from bench.grammar_engines import PERSON
from tests.server.conftest import serving

pytestmark = pytest.mark.bundled

MODEL = "smollm2"
SCHEMA = PERSON  # bounds, an enum, a nested object, a bounded array
WHO = ["a baker", "a pilot", "a child", "a retired teacher", "a cat owner", "a chess player",
       "a farmer", "a nurse", "a student in Paris", "a sailor", "a painter", "a doctor",
       "a runner", "a poet", "a chef", "a musician", "a gardener", "a librarian",
       "a firefighter", "an astronaut"]
PROMPTS = [f"Describe {who} as a JSON record." for who in WHO]
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 30},
            "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two integers",
        "parameters": {"type": "object", "properties": {
            "a": {"type": "integer", "minimum": -1000, "maximum": 1000},
            "b": {"type": "integer", "minimum": -1000, "maximum": 1000}},
            "required": ["a", "b"], "additionalProperties": False}}},
]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
TOOL_PROMPTS = ["What is the weather in Paris?", "What is 12 plus 30?",
                "Is it raining in Tokyo right now?", "Add 7 and 8 for me."]


@pytest.fixture
async def s(loaded):
    from engine import Engine, EngineConfig

    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                    context_length=loaded.context_length,
                    config=EngineConfig(max_concurrent=20))
    async with serving(engine, model=MODEL) as served:
        yield served


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def test_20_prompts_under_a_json_schema_all_validate(s):
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA,
                                                  "strict": True}}
    replies = await asyncio.gather(*[
        s.client.chat.completions.create(model=MODEL, messages=user(p), max_tokens=160,
                                         seed=i, response_format=fmt)
        for i, p in enumerate(PROMPTS)])
    assert max(t.decode_rows for t in s.engine.telemetry()) >= 10  # decoded as one batch
    for r in replies:
        assert r.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(r.choices[0].message.content), SCHEMA)
    assert len({r.choices[0].message.content for r in replies}) > 10  # sampled, not stuck


async def test_a_mixed_batch_leaves_the_free_replies_exact(s):
    """8 free requests (greedy, and the tabs' sampling with a seed) get the same text, token
    for token with the same log-probabilities, sent together without constrained requests
    and then in one batch beside 8 under the JSON schema."""
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA,
                                                  "strict": True}}
    tabs = {"temperature": 0.7, "top_p": 0.95, "extra_body": {"min_p": 0.05,
                                                               "repetition_penalty": 1.1}}

    def free(i: int):
        sampling = {"temperature": 0} if i % 2 else {**tabs, "seed": 50 + i}
        return s.client.chat.completions.create(
            model=MODEL, messages=user(f"Tell me one fact about {WHO[i]}."),
            max_tokens=48, logprobs=True, **sampling)

    def held(i: int):
        return s.client.chat.completions.create(model=MODEL, messages=user(PROMPTS[8 + i]),
                                                max_tokens=48, seed=i, response_format=fmt)

    def said(r) -> tuple[str, str, list[tuple[str, float]]]:
        c = r.choices[0]
        return c.message.content, c.finish_reason, [(t.token, t.logprob)
                                                    for t in c.logprobs.content]

    alone = await asyncio.gather(*[free(i) for i in range(8)])
    mixed = await asyncio.gather(*[free(i) for i in range(8)], *[held(i) for i in range(8)])
    assert max(t.decode_rows for t in s.engine.telemetry()) >= 12  # one batch, mixed
    assert [said(r) for r in mixed[:8]] == [said(r) for r in alone]
    assert len({said(r)[0] for r in alone}) == 8
    for r in mixed[8:]:
        if r.choices[0].finish_reason == "stop":
            jsonschema.validate(json.loads(r.choices[0].message.content), SCHEMA)


async def test_json_object_replies_parse(s):
    """Prompts this small model answers with a short object (any object may go on: on
    others it can ramble to max_tokens, a cut reply; docs/server.md's limits)."""
    system = {"role": "system", "content": "You reply with one short JSON object only."}
    prompts = ['Reply with {"answer": "yes"}.',
               'Return a JSON object with keys "name" and "age" for Bob, 30.',
               'What is 2+2? Answer as {"result": number}.']
    replies = await asyncio.gather(*[
        s.client.chat.completions.create(model=MODEL, messages=[system, *user(p)],
                                         max_tokens=120, temperature=0,
                                         response_format={"type": "json_object"})
        for p in prompts])
    for r in replies:
        assert r.choices[0].finish_reason == "stop"
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    free = await s.client.chat.completions.create(model=MODEL, messages=[system, *user(
        prompts[0])], max_tokens=40, temperature=0)
    assert free.choices[0].message.content != replies[0].choices[0].message.content


async def test_required_calls_validate_against_the_parameters(s):
    replies = await asyncio.gather(*[
        s.client.chat.completions.create(model=MODEL, messages=user(p), max_tokens=240,
                                         seed=i, tools=TOOLS, tool_choice="required")
        for i, p in enumerate(TOOL_PROMPTS)])
    for r in replies:
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.tool_calls
        for call in choice.message.tool_calls:
            assert call.type == "function" and call.id.startswith("call_")
            jsonschema.validate(json.loads(call.function.arguments),
                                PARAMS[call.function.name])
    one = await s.client.chat.completions.create(
        model=MODEL, messages=user(TOOL_PROMPTS[0]), max_tokens=120, seed=0, tools=TOOLS,
        tool_choice="required", parallel_tool_calls=False)
    assert len(one.choices[0].message.tool_calls) == 1


async def test_a_named_function_is_forced(s):
    named = {"type": "function", "function": {"name": "add"}}
    r = await s.client.chat.completions.create(
        model=MODEL, messages=user("What is the weather in Paris?"), max_tokens=120,
        seed=1, tools=TOOLS, tool_choice=named)
    [call] = r.choices[0].message.tool_calls
    assert call.function.name == "add"
    jsonschema.validate(json.loads(call.function.arguments), PARAMS["add"])


async def test_streamed_deltas_reassemble_into_the_same_calls(s):
    kw = {"model": MODEL, "messages": user("What is 2 plus 3, and the weather in Rome?"),
          "max_tokens": 240, "seed": 11, "temperature": 0.8, "tools": TOOLS,
          "tool_choice": "required"}
    whole = (await s.client.chat.completions.create(**kw)).choices[0]
    calls: dict[int, dict[str, str]] = {}
    content, reason = "", None
    async for chunk in await s.client.chat.completions.create(**kw, stream=True):
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for piece in delta.tool_calls or ():
            got = calls.setdefault(piece.index, {"name": "", "arguments": ""})
            if piece.id:
                got["name"] = piece.function.name
            got["arguments"] += piece.function.arguments or ""
        reason = chunk.choices[0].finish_reason or reason
    assert reason == whole.finish_reason == "tool_calls"
    assert content == (whole.message.content or "")
    assert [(c["name"], c["arguments"]) for _, c in sorted(calls.items())] == [
        (c.function.name, c.function.arguments) for c in whole.message.tool_calls]


async def test_a_tool_result_goes_back_to_the_model(s):
    messages = user("What is the weather in Paris?")
    first = (await s.client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=120, seed=2, tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}})).choices[0]
    [call] = first.message.tool_calls
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 24 degrees celsius."}]
    with_result = await s.client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=40, temperature=0, tools=TOOLS,
        tool_choice="none")
    reply = with_result.choices[0]
    assert reply.finish_reason in ("stop", "length") and reply.message.content
    assert reply.message.tool_calls is None
    # the call and the result are in the prompt: it is longer than without them
    bare = await s.client.chat.completions.create(model=MODEL, messages=messages[:1],
                                                  max_tokens=1, temperature=0)
    assert with_result.usage.prompt_tokens > bare.usage.prompt_tokens + 20


async def test_auto_with_a_text_answer_returns_content(s):
    r = await s.client.chat.completions.create(
        model=MODEL, messages=user("Say hello to me."), max_tokens=40, temperature=0,
        tools=TOOLS)
    choice = r.choices[0]
    assert choice.message.content and choice.message.tool_calls is None
    assert choice.finish_reason in ("stop", "length")
