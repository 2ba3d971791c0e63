"""Issue #53 (1): Anthropic's Messages API through the official `anthropic` SDK on loopback,
over the tiny random-weight models (their text is noise: what holds here holds by greedy
decoding, the grammars and the engine's counts). Messages whole and streamed (the SDK's
stream helpers reassemble the whole reply), stop sequences, usage against count_tokens,
tools forced and a tool_result round trip, thinking blocks from a reasoning model with a
budget, errors in Anthropic's shape, x-api-key, and an agent loop that calls two tools and
finishes, as Claude Code drives the API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import anthropic
import jsonschema
import pytest
from anthropic import AsyncAnthropic

from engine import Engine, EngineConfig
from engine.grammars import lark_grammar
from tests.api_clients import anthropic_client
from tests.engine.conftest import skip_without_native
from tests.reasoning_model import QWEN3, thinking_tiny
from tests.server.conftest import MODEL, Served, serving

HI = [{"role": "user", "content": "Hi"}]
WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "input_schema": {"type": "object", "properties": {
               "city": {"enum": ["Oslo", "Paris"]}}, "required": ["city"],
               "additionalProperties": False}}
CLOCK = {"name": "get_time", "description": "The time in a city",
         "input_schema": {"type": "object", "properties": {
             "city": {"enum": ["Oslo", "Paris"]},
             "hour24": {"type": "boolean"}}, "required": ["city", "hour24"],
             "additionalProperties": False}}


def client_of(s: Served, **keys: Any) -> AsyncAnthropic:
    return anthropic_client(s.url, max_retries=0, timeout=60,
                            **(keys or {"api_key": "unused"}))


@asynccontextmanager
async def anthropic_on(serve: Any, **config: Any) -> AsyncIterator[tuple[Served, Any]]:
    s = await serve(**config)
    client = client_of(s)
    try:
        yield s, client
    finally:
        await client.close()


def blocks(message: Any) -> list[dict[str, Any]]:
    """A message's content blocks as plain values (the stream helper's blocks are its own
    classes)."""
    return [b.model_dump(include={"type", "text", "thinking", "signature", "id", "name",
                                  "input"}) for b in message.content]


async def streamed(client: AsyncAnthropic, **body: Any) -> tuple[str, Any, list[str]]:
    """(the text the SDK's text_stream gave, its final message, the event types in order)."""
    kinds: list[str] = []
    async with client.messages.stream(**body) as stream:
        text = []
        async for ev in stream:
            kinds.append(ev.type)
            if ev.type == "text":
                text.append(ev.text)
        final = await stream.get_final_message()
    return "".join(text), final, kinds


async def test_a_message_whole_and_streamed_say_the_same(serve) -> None:
    async with anthropic_on(serve) as (s, client):
        body = dict(model=MODEL, max_tokens=12, extra_body={"temperature": 0}, messages=HI,
                    system="You are terse.")
        whole = await client.messages.create(**body)
        assert whole.type == "message" and whole.role == "assistant" and whole.model == MODEL
        assert [b.type for b in whole.content] == ["text"] and whole.content[0].text
        assert whole.stop_reason == "max_tokens" and whole.stop_sequence is None
        assert whole.usage.output_tokens == 12  # the tiny engine has no end token
        text, final, kinds = await streamed(client, **body)
        assert text == whole.content[0].text
        assert blocks(final) == blocks(whole) and final.stop_reason == "max_tokens"
        assert final.usage.output_tokens == 12
        # the prompt again: all of it but its last token comes from the prefix cache
        prompt = whole.usage.input_tokens + whole.usage.cache_read_input_tokens
        assert final.usage.input_tokens + final.usage.cache_read_input_tokens == prompt
        assert final.usage.cache_read_input_tokens > 0
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
        count = await client.messages.count_tokens(model=MODEL, messages=HI,
                                                   system="You are terse.")
        assert count.input_tokens == prompt == s.engine.finished_requests()[0].prompt_tokens


async def test_the_raw_event_sequence(serve) -> None:
    """Anthropic's order: message_start, ping, a block's start / deltas / stop,
    message_delta with the stop reason and usage, message_stop; each line named."""
    async with anthropic_on(serve) as (s, _):
        body = {"model": MODEL, "max_tokens": 5, "messages": HI, "stream": True}
        async with aiohttp.ClientSession() as http, http.post(
                s.url + "/v1/messages", json=body,
                headers={"anthropic-version": "2023-06-01"}) as r:
            assert r.status == 200 and r.content_type == "text/event-stream"
            raw = (await r.read()).decode()
    events = [e.split("\n") for e in raw.strip().split("\n\n")]
    names = [lines[0].removeprefix("event: ") for lines in events]
    datas = [json.loads(lines[1].removeprefix("data: ")) for lines in events]
    assert all(d["type"] == n for n, d in zip(names, datas, strict=True))
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert set(names[3:-3]) == {"content_block_delta"}
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert datas[-2]["delta"] == {"stop_reason": "max_tokens", "stop_sequence": None}
    assert datas[-2]["usage"]["output_tokens"] == 5
    assert datas[0]["message"]["usage"]["input_tokens"] > 0


async def test_a_stop_sequence_ends_the_reply_and_is_named(serve) -> None:
    async with anthropic_on(serve) as (_, client):
        body = dict(model=MODEL, max_tokens=24, extra_body={"temperature": 0}, messages=HI)
        free = (await client.messages.create(**body)).content[0].text
        # a stop sequence from the middle of the greedy reply, first found where it is
        at = next(i for i in range(4, len(free) - 2)
                  if free.find(free[i:i + 2]) == i and free[i:i + 2].isprintable())
        stop = free[at:at + 2]
        cut = await client.messages.create(**body, stop_sequences=["never-said", stop])
        assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop
        assert cut.content[0].text == free[:at]
        text, final, _ = await streamed(client, **body, stop_sequences=[stop])
        assert text == free[:at] and final.stop_sequence == stop


async def test_forced_tool_use_and_a_tool_result_round_trip(serve) -> None:
    async with anthropic_on(serve, engine={"context_length": 4096}) as (s, client):
        prompts = recording(s.engine)
        body = dict(model=MODEL, max_tokens=300, extra_body={"temperature": 0},
                    tools=[WEATHER, CLOCK],
                    tool_choice={"type": "tool", "name": "get_time"},
                    messages=[{"role": "user", "content": "Time in Oslo?"}])
        r = await client.messages.create(**body)
        assert r.stop_reason == "tool_use"
        calls = [b for b in r.content if b.type == "tool_use"]
        assert len(calls) == 1 and calls[0].name == "get_time"
        jsonschema.validate(calls[0].input, CLOCK["input_schema"])
        _, final, kinds = await streamed(client, **body)
        assert final.stop_reason == "tool_use" and "input_json" in kinds
        assert [(b.name, b.input) for b in final.content if b.type == "tool_use"] == \
            [(calls[0].name, calls[0].input)]
        # any, one at a time: one call of either tool
        any_call = await client.messages.create(**body | {"tool_choice": {
            "type": "any", "disable_parallel_tool_use": True}})
        assert any_call.stop_reason == "tool_use"
        assert [b.type for b in any_call.content] == ["tool_use"]
        assert any_call.content[0].name in ("get_weather", "get_time")
        # the result goes back; the next reply reads it (its prompt holds the result)
        turn = body["messages"] + [
            {"role": "assistant", "content": [b.model_dump() for b in r.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id,
                                          "content": "It is 14:05 in Oslo."}]}]
        after = await client.messages.create(model=MODEL, max_tokens=6, tools=[WEATHER, CLOCK],
                                             messages=turn)
        assert after.stop_reason in ("max_tokens", "end_turn", "tool_use")
        counted = await client.messages.count_tokens(model=MODEL, tools=[WEATHER, CLOCK],
                                                     messages=turn)
        assert counted.input_tokens == \
            after.usage.input_tokens + after.usage.cache_read_input_tokens
        assert counted.input_tokens == s.engine.finished_requests()[-1].prompt_tokens
        assert "It is 14:05 in Oslo." in prompts[-1]
        assert json.dumps(calls[0].input) in prompts[-1]  # the call, rendered back


def recording(eng: Engine) -> list[str]:
    """The prompt text of every request submitted to `eng` from now on."""
    seen: list[str] = []
    submit = eng.submit

    def spy(messages=None, *, template_kwargs=None, **kw):
        prompt = kw.get("prompt_tokens") or eng.prompt_tokens(messages, template_kwargs)
        seen.append(eng.tokenizer.decode(list(prompt)))
        return submit(messages, template_kwargs=template_kwargs, **kw)

    eng.submit = spy  # type: ignore[method-assign]
    return seen


async def test_output_config_format_makes_the_text_json_of_the_schema(serve) -> None:
    schema = {"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]},
                                               "level": {"type": "integer", "minimum": 1,
                                                         "maximum": 9}},
              "required": ["mood", "level"], "additionalProperties": False}
    async with anthropic_on(serve) as (_, client):
        r = await client.messages.create(
            model=MODEL, max_tokens=100, messages=HI, output_config={
                "format": {"type": "json_schema", "schema": schema}, "effort": "max"})
        assert r.stop_reason == "end_turn"  # the grammar complete
        jsonschema.validate(json.loads(r.content[0].text), schema)


@pytest.mark.parametrize(("body", "says"), [
    ({"model": MODEL, "messages": HI}, "'max_tokens' is required"),
    ({"max_tokens": 4, "messages": HI}, "'model' is required"),
    ({"model": MODEL, "max_tokens": 4, "messages": HI, "temperature": -1},
     "'temperature' must be >= 0"),
    ({"model": MODEL, "max_tokens": 4, "messages": [{"role": "system", "content": "x"}]},
     "'messages[0].role' must be one of user, assistant"),
])
async def test_fields_refused_in_anthropic_shape(serve, body, says) -> None:
    """Bodies the SDK would not send (it checks its required fields itself), raw."""
    s = await serve()
    async with aiohttp.ClientSession() as http, http.post(
            s.url + "/v1/messages", json=body) as r:
        assert r.status == 400
        error = await r.json()
    assert error == {"type": "error", "error": {"type": "invalid_request_error",
                                                "message": error["error"]["message"]}}
    assert error["error"]["message"].startswith(says)


@pytest.mark.parametrize(("body", "says"), [
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "iVBORw0KGgo="}}]}]},
     "'messages[0].content[0]' is an image block"),
    ({"max_tokens": 4, "messages": HI, "stop_sequences": [""]}, "'stop_sequences' must"),
    ({"max_tokens": 4, "messages": HI, "tools": [WEATHER],
      "tool_choice": {"type": "tool", "name": "nope"}}, "'tool_choice.name' must"),
    ({"max_tokens": 4, "messages": HI, "tools": [{"name": "f", "input_schema": {
        "type": "object", "properties": {"x": {"type": 3}}}}]},
     "'tools[0].input_schema' is not a usable JSON schema"),
    ({"max_tokens": 4, "messages": HI + [{"role": "assistant", "content": "Sure"}]},
     "the last message must be the user's"),
    ({"max_tokens": 4, "messages": HI, "thinking": {"type": "enabled"}},
     "'thinking.budget_tokens' must"),
    ({"max_tokens": 4, "messages": HI, "tools": [WEATHER], "tool_choice": {"type": "any"},
      "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}},
     "'output_config.format' cannot be combined with a forced tool call"),
    ({"max_tokens": 4, "messages": HI, "output_config": {"format": {
        "type": "json_schema", "schema": {"type": "banana"}}}},
     "'output_config.format.schema' cannot be used"),
])
async def test_errors_in_anthropic_shape(serve, body, says) -> None:
    async with anthropic_on(serve) as (s, client):
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.messages.create(model=MODEL, **body)
        assert caught.value.status_code == 400
        assert caught.value.body["type"] == "error"
        assert caught.value.body["error"]["type"] == "invalid_request_error"
        assert caught.value.body["error"]["message"].startswith(says)
        assert set(caught.value.body) == {"type", "error"}
        assert set(caught.value.body["error"]) == {"type", "message"}
        assert s.engine.finished_requests() == []


async def test_x_api_key_and_bearer_both_work_and_a_wrong_key_is_refused(serve) -> None:
    s = await serve(api_key="s3cret")
    for keys in ({"api_key": "s3cret"}, {"auth_token": "s3cret"}):
        async with client_of(s, **keys) as client:
            r = await client.messages.create(model=MODEL, max_tokens=2, messages=HI)
            assert r.usage.output_tokens == 2
    async with client_of(s, api_key="wrong") as client:
        with pytest.raises(anthropic.AuthenticationError) as caught:
            await client.messages.create(model=MODEL, max_tokens=2, messages=HI)
        assert caught.value.body["error"]["type"] == "authentication_error"
        with pytest.raises(anthropic.AuthenticationError):
            await client.messages.count_tokens(model=MODEL, messages=HI)
    # the OpenAI routes take the Anthropic header as well (one key for the server)
    async with aiohttp.ClientSession() as http, http.get(
            s.url + "/v1/models", headers={"x-api-key": "s3cret"}) as r:
        assert r.status == 200


# -- a reasoning model: thinking blocks ------------------------------------------------------
@pytest.fixture(scope="module")
def qwen():
    skip_without_native()
    return thinking_tiny(seed=7, template=QWEN3)


def engine_on(tiny: Any) -> Engine:
    return Engine(tiny.model, tiny.tokenizer, eos_token_ids=sorted(tiny.eos_token_ids),
                  context_length=tiny.context_length, config=EngineConfig(max_concurrent=8),
                  description="tiny thinking model")


async def test_thinking_blocks_with_a_budget_whole_and_streamed(qwen) -> None:
    async with serving(engine_on(qwen)) as s, client_of(s) as client:
        body = dict(model="tiny", max_tokens=30, extra_body={"temperature": 0},
                    messages=[{"role": "user", "content": "What is 2+2?"}],
                    thinking={"type": "enabled", "budget_tokens": 6})
        whole = await client.messages.create(**body)
        kinds = [b.type for b in whole.content]
        assert kinds[0] == "thinking" and whole.content[0].thinking
        assert whole.content[0].signature == ""  # nothing is signed (docs/server.md)
        for b in whole.content[1:]:
            assert b.type == "text" and "</think>" not in b.text
        text, final, events = await streamed(client, **body)
        assert blocks(final) == blocks(whole) and "thinking" in events
        assert text == "".join(b.text for b in whole.content if b.type == "text")
        # disabled: no thinking at all
        off = await client.messages.create(**body | {"thinking": {"type": "disabled"}})
        assert all(b.type == "text" for b in off.content)


# -- an agent loop, as Claude Code drives the API ----------------------------------------------
def agent_script(eng: Engine) -> None:
    """The engine's "model" for the agent test: each turn steered by a grammar from what the
    prompt holds so far (the tiny model's own text is noise): no result yet, a call of
    get_weather; the weather's result, a call of get_time; both, a closing sentence."""
    from app.tools import Tool, call_grammar

    weather = call_grammar([Tool("get_weather", "", WEATHER["input_schema"])], parallel=False)
    clock = call_grammar([Tool("get_time", "", CLOCK["input_schema"])], parallel=False)
    done = lark_grammar('start: "It is sunny and 14:05 in Oslo."')
    submit = eng.submit

    def steered(messages=None, *, params=None, template_kwargs=None, **kw):
        from dataclasses import replace

        prompt = kw.get("prompt_tokens") or eng.prompt_tokens(messages, template_kwargs)
        text = eng.tokenizer.decode(list(prompt))
        grammar = done if "14:05" in text else clock if "sunny" in text else weather
        return submit(messages, params=replace(params, grammar=grammar),
                      template_kwargs=template_kwargs, **kw)

    eng.submit = steered  # type: ignore[method-assign]


TOOLS_RUN = {"get_weather": lambda args: f"sunny, 21 C in {args['city']}",
             "get_time": lambda args: "14:05" if args["hour24"] else "2:05 pm"}


async def test_an_agent_loop_calls_two_tools_and_finishes(make_engine) -> None:
    """The loop an agent runs (Claude Code's): stream a turn with the tools offered
    (tool_choice auto), run every tool_use block, send the results back, until the model
    ends its turn."""
    eng = make_engine(max_concurrent=4, context_length=4096)
    agent_script(eng)
    async with serving(eng) as s, client_of(s) as client:
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "What is the weather and time in Oslo?"}]
        ran: list[str] = []
        for _turn in range(5):
            async with client.messages.stream(
                    model=MODEL, max_tokens=200, tools=[WEATHER, CLOCK], messages=messages,
                    system="You are an agent. Use the tools.") as stream:
                reply = await stream.get_final_message()
            messages.append({"role": "assistant",
                             "content": [b.model_dump(exclude_none=True)
                                         for b in reply.content]})
            if reply.stop_reason != "tool_use":
                break
            results = []
            for block in reply.content:
                if block.type == "tool_use":
                    ran.append(block.name)
                    results.append({"type": "tool_result", "tool_use_id": block.id,
                                    "content": TOOLS_RUN[block.name](block.input)})
            messages.append({"role": "user", "content": results})
        assert ran == ["get_weather", "get_time"]
        assert reply.stop_reason == "end_turn"
        assert [b.type for b in reply.content] == ["text"]
        assert reply.content[0].text == "It is sunny and 14:05 in Oslo."
        assert len(messages) == 6  # user, call, result, call, result, answer


async def test_a_browser_may_send_the_anthropic_headers(serve) -> None:
    """With --cors-origin, a preflight allows x-api-key and anthropic-version (what the
    SDK sends from a browser)."""
    s = await serve(cors_origin="*")
    async with aiohttp.ClientSession() as http, http.options(
            s.url + "/v1/messages", headers={
                "Origin": "http://example.test", "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "x-api-key, anthropic-version"}) as r:
        assert r.status == 204
        allowed = {h.strip().lower() for h in
                   r.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"x-api-key", "anthropic-version", "content-type"} <= allowed
