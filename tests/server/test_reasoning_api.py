"""Issue #49 (C) through the official `openai` client on loopback: a reasoning model's
reply comes as `message.reasoning_content` / `message.reasoning` and content, streamed as
`delta.reasoning_content` / `delta.reasoning`; `thinking_token_budget` (vLLM's name) is
honoured per row beside free rows whose replies stay as they are alone;
`reasoning_effort` and `chat_template_kwargs` reach the template; usage counts the
reasoning tokens; `response_format` applies to the answer; Harmony's tool calls parse.

The model is tests/reasoning_model.py's tiny random-weight llama with the real Qwen3 or
gpt-oss template. Its text is noise, so the replies are steered into the family's shape
by the budget's own grammar, or, where a test says so, by a grammar put on the engine's
submit (`steered`, the test hook: it replaces the request's grammar as a sampler
constraint would, and records what the engine was asked)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from engine import Engine, EngineConfig
from engine.grammars import lark_grammar
from tests.engine.conftest import skip_without_native
from tests.reasoning_model import GPT_OSS, QWEN3, thinking_tiny
from tests.server.conftest import serving

QUESTION = [{"role": "user", "content": "What is 2+2?"}]


@pytest.fixture(scope="module")
def qwen():
    skip_without_native()
    return thinking_tiny(seed=7, template=QWEN3)


@pytest.fixture(scope="module")
def oss():
    skip_without_native()
    return thinking_tiny(seed=5, template=GPT_OSS)


def engine_on(tiny) -> Engine:
    return Engine(tiny.model, tiny.tokenizer, eos_token_ids=sorted(tiny.eos_token_ids),
                  context_length=tiny.context_length, config=EngineConfig(max_concurrent=8),
                  description="tiny thinking model")


def steered(eng: Engine, grammar: str | None = None) -> list[dict[str, Any]]:
    """The test hook: every submit to `eng` recorded (its template variables and prompt
    text), and its grammar replaced by `grammar` where one is given."""
    seen: list[dict[str, Any]] = []
    submit = eng.submit

    def spy(messages=None, *, params=None, template_kwargs=None, **kw):
        from dataclasses import replace

        prompt = kw.get("prompt_tokens") or eng.prompt_tokens(messages, template_kwargs)
        seen.append({"kwargs": dict(template_kwargs or {}),
                     "prompt": eng.tokenizer.decode(list(prompt))})
        if grammar is not None:
            params = replace(params, grammar=grammar)
        return submit(messages, params=params, template_kwargs=template_kwargs, **kw)

    eng.submit = spy  # type: ignore[method-assign]
    return seen


async def test_reasoning_and_content_split_whole_and_streamed(qwen) -> None:
    async with serving(engine_on(qwen)) as s:
        body = dict(model="tiny", messages=QUESTION, max_tokens=30, temperature=0,
                    extra_body={"thinking_token_budget": 6})
        whole = await s.client.chat.completions.create(**body)
        msg = whole.choices[0].message
        reasoning = msg.model_extra["reasoning_content"]
        assert reasoning and msg.model_extra["reasoning"] == reasoning
        assert "<think>" not in msg.content and "</think>" not in msg.content
        assert "<think>" not in reasoning and "</think>" not in reasoning
        # <think>, the 6 tokens of thinking, </think>
        assert whole.usage.completion_tokens_details.reasoning_tokens == 8
        stream = await s.client.chat.completions.create(
            **body, stream=True, stream_options={"include_usage": True})
        thought, said, alt, usage = [], [], [], None
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for c in chunk.choices:
                extra = c.delta.model_extra or {}
                thought.append(extra.get("reasoning_content") or "")
                alt.append(extra.get("reasoning") or "")
                said.append(c.delta.content or "")
        assert "".join(thought) == reasoning == "".join(alt)
        assert "".join(said) == msg.content
        assert usage.completion_tokens_details.reasoning_tokens == 8


async def test_the_budget_holds_per_row_beside_free_rows(qwen) -> None:
    """Free replies alone, then the same beside budgeted ones at once: the free ones are
    unchanged, each budgeted one thought exactly its budget."""
    async with serving(engine_on(qwen)) as s:
        async def ask(content: str, budget: int | None):
            extra = {} if budget is None else {"thinking_token_budget": budget}
            r = await s.client.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": content}], max_tokens=24,
                temperature=0, extra_body=extra)
            m = r.choices[0].message
            return (m.model_extra.get("reasoning_content"), m.content,
                    r.usage.completion_tokens_details.reasoning_tokens)

        free = ["Name a colour.", "Count to three.", "Say hi."]
        alone = [await ask(q, None) for q in free]
        budgets = {"Why?": 2, "Spell cat.": 5, "A prime?": 9}
        together = await asyncio.gather(*[ask(q, None) for q in free],
                                        *[ask(q, b) for q, b in budgets.items()])
        assert list(together[:3]) == alone
        for (reasoning, _content, tokens), budget in zip(together[3:], budgets.values(),
                                                        strict=True):
            assert tokens == budget + 2 and reasoning is not None
        # a budget of 0: no thinking at all, the answer at once
        reasoning, content, tokens = await ask("Quick?", 0)
        assert reasoning == "" and tokens == 2


async def test_effort_reaches_the_template(oss, qwen) -> None:
    eng = engine_on(oss)
    seen = steered(eng)
    async with serving(eng) as s:
        for effort in ("none", "low", "high"):
            await s.client.chat.completions.create(model="tiny", messages=QUESTION,
                                                   max_tokens=2, reasoning_effort=effort)
    levels = {"none": "low", "low": "low", "high": "high"}
    for level, asked in zip(levels.values(), seen, strict=True):
        assert asked["kwargs"]["reasoning_effort"] == level
        assert f"Reasoning: {level}\n" in asked["prompt"]
    eng = engine_on(qwen)
    seen = steered(eng)
    async with serving(eng) as s:
        for effort in ("none", "high"):
            await s.client.chat.completions.create(model="tiny", messages=QUESTION,
                                                   max_tokens=2, reasoning_effort=effort)
        await s.client.chat.completions.create(
            model="tiny", messages=QUESTION, max_tokens=2,
            extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert seen[0]["prompt"].endswith("<think>\n\n</think>\n\n")  # none: thinking off
    assert not seen[1]["prompt"].endswith("</think>\n\n")
    assert seen[2]["kwargs"] == {"enable_thinking": False}
    assert seen[2]["prompt"] == seen[0]["prompt"]


async def test_a_response_format_applies_to_the_answer(qwen) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 9}},
              "required": ["n"], "additionalProperties": False}
    async with serving(engine_on(qwen)) as s:
        r = await s.client.chat.completions.create(
            model="tiny", messages=QUESTION, max_tokens=60, temperature=0,
            response_format={"type": "json_schema", "json_schema": {
                "name": "n", "schema": schema, "strict": True}},
            extra_body={"thinking_token_budget": 5})
    msg = r.choices[0].message
    assert msg.model_extra["reasoning_content"]
    assert json.loads(msg.content).keys() == {"n"}


WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
HARMONY_CALL = lark_grammar(
    'start: <|channel|> "analysis" <|message|> /[a-z ]{3,12}/ <|end|> <|start|> '
    '"assistant" <|channel|> "commentary to=functions.get_weather " <|constrain|> "json" '
    '<|message|> "{\\"city\\": \\"Paris\\"}" <|call|>\n')


@pytest.mark.parametrize("stream", [False, True])
async def test_harmony_tool_calls_parse(oss, stream) -> None:
    eng = engine_on(oss)
    steered(eng, HARMONY_CALL)
    async with serving(eng) as s:
        body = dict(model="tiny", messages=QUESTION, tools=WEATHER, max_tokens=160,
                    temperature=0)
        if not stream:
            r = await s.client.chat.completions.create(**body)
            choice = r.choices[0]
            calls = [(c.function.name, c.function.arguments)
                     for c in choice.message.tool_calls]
            reasoning = choice.message.model_extra["reasoning_content"]
            reason = choice.finish_reason
        else:
            args: dict[int, list[str]] = {}
            names: dict[int, str] = {}
            thought, reason = [], None
            async for chunk in await s.client.chat.completions.create(**body, stream=True):
                for c in chunk.choices:
                    thought.append((c.delta.model_extra or {}).get("reasoning_content") or "")
                    for call in c.delta.tool_calls or ():
                        if call.function.name:
                            names[call.index] = call.function.name
                        args.setdefault(call.index, []).append(call.function.arguments or "")
                    reason = c.finish_reason or reason
            calls = [(names[i], "".join(args[i])) for i in sorted(names)]
            reasoning = "".join(thought)
    assert calls == [("get_weather", '{"city": "Paris"}')]
    assert reasoning and reason == "tool_calls"


@pytest.mark.parametrize("stream", [False, True])
async def test_the_server_splits_a_harmony_reply_by_openai_harmonys_parse(
        oss, monkeypatch, stream) -> None:
    """The reply's text, as the server's splitter was fed it, parsed by openai-harmony
    itself (re-encoded in o200k_harmony): its analysis is the reasoning sent, its call to
    functions.get_weather the tool call sent, streamed or whole."""
    from openai_harmony import Role

    from engine.reasoning import harmony

    fed: dict[int, list[str]] = {}  # each splitter's text (a whole reply's is split anew)
    feed = harmony.HarmonySplit.feed

    def recording(self, text):
        fed.setdefault(id(self), []).append(text)
        return feed(self, text)

    monkeypatch.setattr(harmony.HarmonySplit, "feed", recording)
    eng = engine_on(oss)
    steered(eng, HARMONY_CALL)
    body = dict(model="tiny", messages=QUESTION, tools=WEATHER, max_tokens=160,
                temperature=0)
    async with serving(eng) as s:
        if stream:
            thought, names, args = [], [], []
            async for chunk in await s.client.chat.completions.create(**body, stream=True):
                for c in chunk.choices:
                    thought.append((c.delta.model_extra or {}).get("reasoning_content") or "")
                    names += [t.function.name for t in c.delta.tool_calls or ()
                              if t.function.name]
                    args += [t.function.arguments or "" for t in c.delta.tool_calls or ()]
            reasoning, calls = "".join(thought), [(n, "".join(args)) for n in names]
        else:
            msg = (await s.client.chat.completions.create(**body)).choices[0].message
            reasoning = msg.model_extra["reasoning_content"]
            calls = [(c.function.name, c.function.arguments) for c in msg.tool_calls]
    enc = harmony.harmony_encoding()
    assert fed and enc is not None
    texts = {"".join(t) for t in fed.values()}
    assert len(texts) == 1  # the stream's splitter and the whole reply's read the same
    tokens = enc.encode(texts.pop(), allowed_special="all")
    reference = enc.parse_messages_from_completion_tokens(tokens, Role.ASSISTANT)
    assert [m.channel for m in reference] == ["analysis", "commentary"]
    assert reasoning == reference[0].content[0].text and reasoning
    assert reference[1].recipient == "functions.get_weather"
    assert calls == [("get_weather", reference[1].content[0].text)]


async def test_a_reply_that_does_not_think_has_no_reasoning(qwen) -> None:
    """Thinking off (Qwen3's template closes an empty block in the prompt): the reply is
    all answer, no reasoning and no reasoning tokens, whole and streamed."""
    async with serving(engine_on(qwen)) as s:
        body = dict(model="tiny", messages=QUESTION, max_tokens=12, temperature=0,
                    reasoning_effort="none")
        whole = await s.client.chat.completions.create(**body)
        streamed = await s.client.chat.completions.create(
            **body, stream=True, stream_options={"include_usage": True})
        said, usage = [], None
        async for chunk in streamed:
            usage = chunk.usage or usage
            said += [c.delta.content or "" for c in chunk.choices
                     if not (c.delta.model_extra or {}).get("reasoning_content")]
    msg = whole.choices[0].message
    assert msg.model_extra["reasoning_content"] == "" and msg.content
    assert whole.usage.completion_tokens_details.reasoning_tokens == 0
    assert "".join(said) == msg.content
    assert usage.completion_tokens_details.reasoning_tokens == 0


async def test_completions_return_a_thinking_models_text_unsplit(qwen) -> None:
    """/v1/completions takes raw text, so the reply's thinking is not split off: as
    llama.cpp's /completion and vLLM (whose reasoning parsers apply to chat only) do. A
    prompt that opens Qwen3's `<think>` gets back the thinking, its end tag and the answer
    as one text, with no reasoning field and no reasoning tokens counted."""
    prompt = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n"
    grammar = lark_grammar('start: /[a-z ]{4,10}/ </think> "\\n\\nFour."\n')
    eng = engine_on(qwen)
    steered(eng, grammar)
    async with serving(eng) as s:
        r = await s.client.completions.create(model="tiny", prompt=prompt, max_tokens=40,
                                              temperature=0)
        streamed = [c.choices[0].text async for c in await s.client.completions.create(
            model="tiny", prompt=prompt, max_tokens=40, temperature=0, stream=True)
            if c.choices]
    choice = r.choices[0]
    thought, answer = choice.text.split("</think>")
    assert thought.strip() and answer == "\n\nFour."
    assert not (choice.model_extra or {}).get("reasoning_content")
    assert r.usage.completion_tokens_details is None or \
        not r.usage.completion_tokens_details.reasoning_tokens
    assert "".join(streamed) == choice.text
