"""Issue #53 (2): OpenAI's Responses API through the official `openai` SDK on loopback, over
the tiny random-weight models (their text is noise: what holds here holds by greedy
decoding, the grammars and the engine's counts). Responses whole and streamed (the raw
event sequence, and the SDK's stream reassembling the whole text), function tools with a
function_call_output round trip, a JSON-schema text format, reasoning items from a
reasoning model, stored responses continued by previous_response_id (also after a server
restart on the same database file), get and delete, and refusals naming what is not
supported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import jsonschema
import openai
import pytest

from app.backend import LocalTarget
from app.server import ApiServer, ServerConfig
from app.storage.stored_responses import StoredResponses
from engine import Engine, EngineConfig
from tests.api_clients import openai_client
from tests.engine.conftest import skip_without_native
from tests.reasoning_model import QWEN3, thinking_tiny
from tests.server.conftest import MODEL, Served, serving
from tests.server.test_anthropic_api import recording

GREEDY = {"temperature": 0}
CLOCK = {"type": "function", "name": "get_time", "description": "The time in a city",
         "parameters": {"type": "object", "properties": {
             "city": {"enum": ["Oslo", "Paris"]}, "hour24": {"type": "boolean"}},
             "required": ["city", "hour24"], "additionalProperties": False}}
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather",
           "parameters": {"type": "object", "properties": {
               "city": {"enum": ["Oslo", "Paris"]}}, "required": ["city"],
               "additionalProperties": False}}


async def raw_events(s: Served, body: dict[str, Any]) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.post(
            s.url + "/v1/responses", json=body | {"stream": True}) as r:
        assert r.status == 200 and r.content_type == "text/event-stream"
        raw = (await r.read()).decode()
    out = []
    for block in raw.strip().split("\n\n"):
        name, data = block.split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert name.removeprefix("event: ") == event["type"]
        out.append(event)
    return out


async def test_a_response_whole_and_streamed_say_the_same(serve) -> None:
    s = await serve()
    body = dict(model=MODEL, input="Hi", instructions="You are terse.",
                max_output_tokens=12, **GREEDY)
    whole = await s.client.responses.create(**body)
    assert whole.object == "response" and whole.model == MODEL
    assert whole.status == "incomplete"  # the tiny engine has no end token
    assert whole.incomplete_details.reason == "max_output_tokens"
    assert [i.type for i in whole.output] == ["message"] and whole.output_text
    assert whole.usage.output_tokens == 12 and whole.instructions == "You are terse."
    # the same conversation on the chat route: the same greedy text
    chat = await s.client.chat.completions.create(
        model=MODEL, max_tokens=12, temperature=0,
        messages=[{"role": "system", "content": "You are terse."},
                  {"role": "user", "content": "Hi"}])
    assert chat.choices[0].message.content == whole.output_text
    assert chat.usage.prompt_tokens == whole.usage.input_tokens
    # streamed through the SDK: the deltas are the text, the last event the response
    deltas, last = [], None
    async with s.client.responses.stream(**body) as stream:
        async for ev in stream:
            if ev.type == "response.output_text.delta":
                deltas.append(ev.delta)
            last = ev
    assert "".join(deltas) == whole.output_text
    assert last.type == "response.incomplete"
    assert last.response.output_text == whole.output_text
    assert last.response.usage.output_tokens == 12
    assert last.response.usage.input_tokens_details.cached_tokens > 0  # the prefix cache


async def test_the_raw_event_sequence(serve) -> None:
    s = await serve()
    events = await raw_events(s, {"model": MODEL, "input": "Hi", "max_output_tokens": 5})
    kinds = [e["type"] for e in events]
    assert kinds[:5] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added",
                         "response.output_text.delta"]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done", "response.incomplete"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == text
    assert events[-4]["text"] == text


async def test_a_grammar_complete_response_is_completed_and_streams_to_the_sdk(serve) -> None:
    """A JSON-schema text format: the text is one JSON value of the schema, the response
    completed; the SDK's stream helper gives the same final response."""
    schema = {"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]},
                                               "level": {"type": "integer", "minimum": 1,
                                                         "maximum": 9}},
              "required": ["mood", "level"], "additionalProperties": False}
    s = await serve()
    fmt = {"format": {"type": "json_schema", "name": "mood", "schema": schema,
                      "strict": True}}
    r = await s.client.responses.create(model=MODEL, input="Hi", max_output_tokens=100,
                                        text=fmt, **GREEDY)
    assert r.status == "completed" and r.incomplete_details is None
    jsonschema.validate(json.loads(r.output_text), schema)
    async with s.client.responses.stream(model=MODEL, input="Hi", max_output_tokens=100,
                                         text=fmt, **GREEDY) as stream:
        final = await stream.get_final_response()
    assert final.status == "completed" and final.output_text == r.output_text
    # json_object: any JSON object
    obj = await s.client.responses.create(model=MODEL, input="Hi", max_output_tokens=60,
                                          text={"format": {"type": "json_object"}}, **GREEDY)
    if obj.status == "completed":
        assert isinstance(json.loads(obj.output_text), dict)


async def test_function_tools_and_a_function_call_output_round_trip(serve) -> None:
    s = await serve(engine={"context_length": 4096})
    prompts = recording(s.engine)
    body = dict(model=MODEL, max_output_tokens=300, tools=[WEATHER, CLOCK],
                tool_choice={"type": "function", "name": "get_time"},
                input=[{"role": "user", "content": "Time in Oslo?"}], **GREEDY)
    r = await s.client.responses.create(**body)
    calls = [i for i in r.output if i.type == "function_call"]
    assert r.status == "completed" and len(calls) == 1 and calls[0].name == "get_time"
    jsonschema.validate(json.loads(calls[0].arguments), CLOCK["parameters"])
    assert calls[0].call_id and calls[0].id.startswith("fc_")
    # streamed: the arguments' deltas and done, the same call
    async with s.client.responses.stream(**body) as stream:
        kinds = [ev.type async for ev in stream]
        final = await stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    assert [(i.name, i.arguments) for i in final.output if i.type == "function_call"] == \
        [(calls[0].name, calls[0].arguments)]
    # required: a call of either tool
    any_call = await s.client.responses.create(**body | {"tool_choice": "required",
                                                          "parallel_tool_calls": False})
    assert [i.type for i in any_call.output] == ["function_call"]
    # the output goes back with the call; the next prompt holds both
    turn = body["input"] + [calls[0].model_dump(include={"type", "call_id", "name",
                                                         "arguments"}),
                            {"type": "function_call_output", "call_id": calls[0].call_id,
                             "output": "It is 14:05 in Oslo."}]
    after = await s.client.responses.create(model=MODEL, max_output_tokens=6, input=turn,
                                            tools=[WEATHER, CLOCK], store=False)
    assert after.status in ("incomplete", "completed")
    assert "It is 14:05 in Oslo." in prompts[-1] and calls[0].arguments in prompts[-1]
    with pytest.raises(openai.NotFoundError):  # store=False: not kept
        await s.client.responses.retrieve(after.id)


async def test_continuation_get_and_delete(serve) -> None:
    s = await serve()
    prompts = recording(s.engine)
    first = await s.client.responses.create(model=MODEL, input="My name is Ada.",
                                            instructions="Be brief.",
                                            max_output_tokens=4, **GREEDY)
    got = await s.client.responses.retrieve(first.id)
    assert got.id == first.id and got.output_text == first.output_text
    second = await s.client.responses.create(model=MODEL, input="What is my name?",
                                             previous_response_id=first.id,
                                             instructions="Be brief.",
                                             max_output_tokens=4, **GREEDY)
    assert second.previous_response_id == first.id
    # the second prompt is the first conversation (its reply too) and the new input
    assert "My name is Ada." in prompts[-1] and first.output_text in prompts[-1]
    assert prompts[-1].index("My name is Ada.") < prompts[-1].index("What is my name?")
    assert second.usage.input_tokens > first.usage.input_tokens
    # the same conversation sent whole: the same greedy text
    whole = await s.client.responses.create(
        model=MODEL, instructions="Be brief.", max_output_tokens=4, store=False, **GREEDY,
        input=[{"role": "user", "content": "My name is Ada."},
               {"role": "assistant", "content": [{"type": "output_text",
                                                  "text": first.output_text}]},
               {"role": "user", "content": "What is my name?"}])
    assert whole.output_text == second.output_text
    deleted = await s.client.responses.delete(first.id)
    assert deleted is None  # the SDK returns nothing for a delete
    with pytest.raises(openai.NotFoundError):
        await s.client.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        await s.client.responses.delete(first.id)
    with pytest.raises(openai.BadRequestError) as caught:
        await s.client.responses.create(model=MODEL, input="x", previous_response_id=first.id)
    assert caught.value.body["param"] == "previous_response_id"


async def test_continuation_after_a_restart_on_the_same_database(make_engine,
                                                                  tmp_path: Path) -> None:
    db = tmp_path / "history.db"

    async def serving_on_db() -> Any:
        store = StoredResponses(db)
        eng = make_engine()
        await eng.start()
        target = LocalTarget(eng)
        server = ApiServer(lambda: target, lambda: MODEL, ServerConfig(port=0),
                           stored_responses=store)
        url = await server.start()
        client = openai_client(url + "/v1", api_key="unused", max_retries=0)
        return server, eng, store, client

    server, eng, store, client = await serving_on_db()
    try:
        first = await client.responses.create(model=MODEL, input="Remember 42.",
                                              max_output_tokens=3, **GREEDY)
    finally:
        await client.close()
        await server.stop()
        await eng.shutdown()
        store.close()
    server, eng, store, client = await serving_on_db()
    prompts = recording(eng)
    try:
        assert (await client.responses.retrieve(first.id)).output_text == first.output_text
        second = await client.responses.create(model=MODEL, input="Which number?",
                                               previous_response_id=first.id,
                                               max_output_tokens=3, **GREEDY)
        assert second.status == "incomplete"
        assert "Remember 42." in prompts[-1] and first.output_text in prompts[-1]
    finally:
        await client.close()
        await server.stop()
        await eng.shutdown()
        store.close()


def test_the_store_keeps_to_its_retention_and_cap(tmp_path: Path) -> None:
    store = StoredResponses(tmp_path / "h.db", retention_days=30, max_responses=3)
    for i in range(5):
        store.put(f"resp_{i}", [{"type": "message", "role": "user", "content": str(i)}],
                  {"id": f"resp_{i}", "output": []})
    assert [store.get(f"resp_{i}") is not None for i in range(5)] == \
        [False, False, True, True, True]  # the cap: the oldest went first
    store.retention_s = -1.0  # every one is past the retention now
    assert store.get("resp_4") is None
    store.close()
    memory = StoredResponses(max_responses=2)
    for i in range(3):
        memory.put(f"r{i}", [], {"id": f"r{i}"})
    assert memory.get("r0") is None and memory.get("r2") == ([], {"id": "r2"})


@pytest.mark.parametrize(("body", "says", "param"), [
    ({"input": "x", "tools": [{"type": "web_search"}]}, "'web_search' tools are not "
     "supported", "tools[0].type"),
    ({"input": "x", "tools": [{"type": "file_search", "vector_store_ids": ["v"]}]},
     "'file_search'", "tools[0].type"),
    ({"input": "x", "tools": [{"type": "computer_use_preview"}]}, "'computer_use_preview'",
     "tools[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_image",
                                              "image_url": "http://x/y.png"}]}]},
     "'input[0].content[0]' is an image, and this model reads text only",
     "input[0].content[0]"),  # the tiny model reads text only (#52: test_responses_images)
    ({"input": [{"type": "web_search_call", "id": "ws_1"}]}, "'web_search_call' is not "
     "supported", "input[0].type"),
    ({"input": "x", "background": True}, "'background' responses are not supported",
     "background"),
    ({"input": "x", "temperature": -1}, "'temperature' must be >= 0", "temperature"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens", "max_output_tokens"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "name": "x",
                                        "schema": {"type": "nonsense"}}}},
     "text.format", None),
    ({"input": "x", "previous_response_id": "resp_nope"}, "no stored response",
     "previous_response_id"),
    ({"input": []}, "'input' must be", "input"),
    ({"input": [{"type": "reasoning", "summary": []}]}, "the input holds no message",
     "input"),
])
async def test_refusals_name_the_field(serve, body, says, param) -> None:
    s = await serve()
    with pytest.raises(openai.BadRequestError) as caught:
        await s.client.responses.create(model=MODEL, **body)
    error = caught.value.body
    assert says in error["message"], error
    if param is not None:
        assert error["param"] == param
    assert caught.value.status_code == 400


# -- a reasoning model: reasoning items ------------------------------------------------------
@pytest.fixture(scope="module")
def qwen():
    skip_without_native()
    return thinking_tiny(seed=7, template=QWEN3)


async def test_reasoning_items_whole_and_streamed(qwen) -> None:
    engine = Engine(qwen.model, qwen.tokenizer, eos_token_ids=sorted(qwen.eos_token_ids),
                    context_length=qwen.context_length, config=EngineConfig(max_concurrent=8))
    async with serving(engine) as s:
        body = dict(model=MODEL, input="What is 2+2?", max_output_tokens=30,
                    reasoning={"effort": "low"},
                    extra_body={"thinking_token_budget": 6}, **GREEDY)
        whole = await s.client.responses.create(**body)
        assert whole.output[0].type == "reasoning"
        thought = whole.output[0].content[0].text
        assert thought and whole.usage.output_tokens_details.reasoning_tokens > 0
        assert whole.reasoning.effort == "low"
        for item in whole.output[1:]:
            assert item.type == "message" and "</think>" not in item.content[0].text
        raw = {k: v for k, v in body.items() if k != "extra_body"} | body["extra_body"]
        events = await raw_events(s, raw)
        streamed = "".join(e["delta"] for e in events
                           if e["type"] == "response.reasoning_text.delta")
        assert streamed == thought
        assert events[-1]["response"]["output"][0]["content"][0]["text"] == thought
        # the reasoning item goes back as input: the template is handed it
        again = await s.client.responses.create(model=MODEL, max_output_tokens=3,
                                                input=[{"role": "user", "content": "Hi"},
                                                       whole.output[0].model_dump(),
                                                       {"role": "user", "content": "And?"}])
        assert again.usage.input_tokens > 0


def test_serve_stores_in_the_history_database_unless_told(monkeypatch, tmp_path) -> None:
    from app.server.serve import parse_args, stored_responses

    monkeypatch.setenv("BATCHCHAT_DB", str(tmp_path / "history.db"))
    store = stored_responses(parse_args(["--responses-retention-days", "2"]))
    assert store.path == tmp_path / "history.db" and store.retention_s == 2 * 86400
    assert not store.path.exists()  # opened on the first response only
    store.put("resp_1", [], {"id": "resp_1"})
    assert store.path.exists() and store.get("resp_1") == ([], {"id": "resp_1"})
    store.close()
    assert stored_responses(parse_args(["--responses-db", "memory"])).path is None
