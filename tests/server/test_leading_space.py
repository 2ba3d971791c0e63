"""A completion keeps the leading space the model wrote (issue #46, item 2): for "The capital
of France is" the bundled SmolLM2 writes " Paris."; the text was "Paris." while its own
logprobs said " Paris". Whole and streamed, completions and chat (whose replies are not
stripped either: docs/server.md), through the official openai client on loopback."""

from __future__ import annotations

import pytest

from tests.server.conftest import serving

pytestmark = pytest.mark.bundled

MODEL = "smollm2"
PROMPT = "The capital of France is"


@pytest.fixture
async def s(loaded):
    from engine import Engine

    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                    context_length=loaded.context_length)
    async with serving(engine, model=MODEL) as served:
        yield served


async def test_a_completion_keeps_its_first_space(s, loaded):
    whole = await s.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8,
                                              temperature=0, logprobs=1)
    choice = whole.choices[0]
    assert choice.text.startswith(" Paris"), choice.text
    assert choice.text == "".join(choice.logprobs.tokens)  # the text is its tokens'
    # prompt + completion is the text the model produced
    ids = loaded.tokenizer.encode(PROMPT) + loaded.tokenizer.encode(choice.text,
                                                                    add_special_tokens=False)
    assert loaded.tokenizer.decode(ids) == PROMPT + choice.text
    stream = await s.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8,
                                               temperature=0, stream=True)
    assert "".join([c.choices[0].text async for c in stream if c.choices]) == choice.text


async def test_a_chat_reply_is_its_tokens_text_unstripped(s):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    whole = await s.client.chat.completions.create(model=MODEL, messages=messages,
                                                   max_tokens=12, temperature=0,
                                                   logprobs=True)
    choice = whole.choices[0]
    assert choice.message.content == "".join(t.token for t in choice.logprobs.content)
    stream = await s.client.chat.completions.create(model=MODEL, messages=messages,
                                                    max_tokens=12, temperature=0,
                                                    stream=True)
    streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert streamed == choice.message.content
