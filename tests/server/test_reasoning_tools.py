"""Issue #49: tool calls and a reasoning model's thinking together, through the official
`openai` client on loopback (LM Studio #1870: thinking and tool calls collide).

- A call that closes the thinking (written before `</think>`, as Qwen3.6 does) is a call,
  whole and streamed; one followed by more thinking is a rehearsal and stays thinking.
- gpt-oss's call addressed from its analysis channel is a call.
- The thinking sent back with a turn's calls reaches the next prompt where the template
  keeps it (Qwen3 and gpt-oss: between the calls of the turn still going on).
- A forced call (tool_choice `required` or named) thinks first, within its budget, then
  calls; with thinking off it calls at once.

The model is tests/reasoning_model.py's tiny random-weight llama with the real Qwen3 or
gpt-oss template, its text steered by a grammar put on the engine's submit (the test
hook `steered` of test_reasoning_api.py) or by the request's own grammar."""

from __future__ import annotations

import json

import pytest

from engine.grammars import lark_grammar
from tests.engine.conftest import skip_without_native
from tests.reasoning_model import GPT_OSS, QWEN3, thinking_tiny
from tests.server.conftest import serving
from tests.server.test_reasoning_api import QUESTION, WEATHER, engine_on, steered


@pytest.fixture(scope="module")
def qwen():
    skip_without_native()
    return thinking_tiny(seed=7, template=QWEN3)


@pytest.fixture(scope="module")
def oss():
    skip_without_native()
    return thinking_tiny(seed=5, template=GPT_OSS)


CALL = '<tool_call>\\n{\\"name\\": \\"get_weather\\", \\"arguments\\": {\\"city\\": ' \
       '\\"Paris\\"}}\\n</tool_call>'
# Qwen3's added <think> / </think> tokens, a call written before the thinking ends
CALL_IN_THINKING = lark_grammar(f'start: <think> /[a-z ]{{3,12}}/ "\\n{CALL}\\n" </think>\n')
REHEARSAL = lark_grammar(
    f'start: <think> /[a-z ]{{3,12}}/ " {CALL} no." </think> "\\n\\nFine."\n')


async def ask(s, stream: bool, **body):
    """(reasoning, content, [(name, arguments)], finish_reason), whole or streamed."""
    body = dict(model="tiny", messages=QUESTION, max_tokens=120, temperature=0) | body
    if not stream:
        r = await s.client.chat.completions.create(**body)
        c = r.choices[0]
        calls = [(t.function.name, t.function.arguments) for t in c.message.tool_calls or ()]
        return (c.message.model_extra.get("reasoning_content"), c.message.content, calls,
                c.finish_reason)
    thought, said, names, args, reason = [], [], {}, {}, None
    async for chunk in await s.client.chat.completions.create(**body, stream=True):
        for c in chunk.choices:
            thought.append((c.delta.model_extra or {}).get("reasoning_content") or "")
            said.append(c.delta.content or "")
            for call in c.delta.tool_calls or ():
                if call.function.name:
                    names[call.index] = call.function.name
                args.setdefault(call.index, []).append(call.function.arguments or "")
            reason = c.finish_reason or reason
    calls = [(names[i], "".join(args[i])) for i in sorted(names)]
    return "".join(thought), "".join(said), calls, reason


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_that_closes_the_thinking_is_a_call(qwen, stream) -> None:
    eng = engine_on(qwen)
    steered(eng, CALL_IN_THINKING)
    async with serving(eng) as s:
        reasoning, content, calls, reason = await ask(s, stream, tools=WEATHER)
    assert calls == [("get_weather", '{"city": "Paris"}')]
    assert reason == "tool_calls"
    assert reasoning and "<tool_call>" not in reasoning and "</think>" not in reasoning
    assert not content


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_rehearsed_in_the_thinking_stays_thinking(qwen, stream) -> None:
    eng = engine_on(qwen)
    steered(eng, REHEARSAL)
    async with serving(eng) as s:
        reasoning, content, calls, reason = await ask(s, stream, tools=WEATHER)
    assert calls == [] and reason == "stop"
    assert "<tool_call>" in reasoning and reasoning.endswith("no.")
    assert content == "Fine."


async def test_gpt_oss_calls_from_its_analysis_channel(oss) -> None:
    eng = engine_on(oss)
    steered(eng, lark_grammar(
        'start: <|channel|> "analysis to=functions.get_weather " <|constrain|> "json" '
        '<|message|> "{\\"city\\": \\"Oslo\\"}" <|call|>\n'))
    async with serving(eng) as s:
        for stream in (False, True):
            _reasoning, _content, calls, reason = await ask(s, stream, tools=WEATHER)
            assert calls == [("get_weather", '{"city": "Oslo"}')] and reason == "tool_calls"


@pytest.mark.parametrize(("model", "kept"), [
    ("qwen", "<think>\nTHOUGHTCALL\n</think>"),
    ("oss", "<|channel|>analysis<|message|>THOUGHTCALL<|end|>")])
async def test_the_thinking_of_a_turns_calls_reaches_the_next_prompt(
        model, kept, request) -> None:
    """A client sends back the reply's reasoning_content with its tool_calls and the
    tool's result: the template keeps it, the turn being still on (Qwen3, gpt-oss)."""
    eng = engine_on(request.getfixturevalue(model))
    seen = steered(eng)
    turn = QUESTION + [
        {"role": "assistant", "content": "", "reasoning_content": "THOUGHTCALL",
         "tool_calls": [{"id": "call_1", "type": "function", "function": {
             "name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "SUNNY"}]
    finished = [{"role": "user", "content": "USERTWO"}]
    async with serving(eng) as s:
        await s.client.chat.completions.create(model="tiny", messages=turn, tools=WEATHER,
                                               max_tokens=2)
        # after a later user message the turn is over: its thinking is dropped
        await s.client.chat.completions.create(
            model="tiny", tools=WEATHER, max_tokens=2,
            messages=turn + [{"role": "assistant", "content": "It is sunny."}] + finished)
    assert kept in seen[0]["prompt"] and "SUNNY" in seen[0]["prompt"]
    assert "THOUGHTCALL" not in seen[1]["prompt"] and "USERTWO" in seen[1]["prompt"]


# the city one of a few: the random model's call is short and whole
CITIES = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}},
                   "required": ["city"], "additionalProperties": False}}}]


@pytest.mark.parametrize("choice", ["required", {"type": "function",
                                                 "function": {"name": "get_weather"}}])
async def test_a_forced_call_thinks_within_its_budget_then_calls(qwen, choice) -> None:
    async with serving(engine_on(qwen)) as s:
        r = await s.client.chat.completions.create(
            model="tiny", messages=QUESTION, tools=CITIES, tool_choice=choice,
            max_tokens=200, temperature=0, extra_body={"thinking_token_budget": 7})
        msg = r.choices[0].message
        assert msg.model_extra["reasoning_content"]
        assert r.usage.completion_tokens_details.reasoning_tokens == 7 + 2
        assert [c.function.name for c in msg.tool_calls] == ["get_weather"]
        assert json.loads(msg.tool_calls[0].function.arguments)["city"] in ("Paris", "Oslo")
        assert r.choices[0].finish_reason == "tool_calls" and not msg.content
        # thinking off: the call at once, no thinking
        r = await s.client.chat.completions.create(
            model="tiny", messages=QUESTION, tools=CITIES, tool_choice=choice,
            max_tokens=200, temperature=0, reasoning_effort="none")
        msg = r.choices[0].message
        assert not msg.model_extra.get("reasoning_content")
        assert r.usage.completion_tokens_details.reasoning_tokens == 0
        assert [c.function.name for c in msg.tool_calls] == ["get_weather"]


async def test_gpt_oss_forced_call_thinks_then_calls(oss) -> None:
    """gpt-oss cannot stop thinking: its forced call comes after its analysis message,
    in the final channel, in the forced call's format."""
    async with serving(engine_on(oss)) as s:
        r = await s.client.chat.completions.create(
            model="tiny", messages=QUESTION, tools=CITIES, tool_choice="required",
            max_tokens=200, temperature=0, extra_body={"thinking_token_budget": 6})
    msg = r.choices[0].message
    assert msg.model_extra["reasoning_content"]
    assert [c.function.name for c in msg.tool_calls] == ["get_weather"]
    assert r.choices[0].finish_reason == "tool_calls" and not msg.content
