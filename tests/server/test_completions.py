"""Chat and text completions through the official openai client: exact tokens, usage with
cached tokens, streaming with include_usage, models."""

from engine import SamplingParams
from tests.engine.conftest import reference_tokens
from tests.server.conftest import MODEL

N = 12
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]


async def test_models_lists_the_served_model(serve):
    s = await serve()
    models = await s.client.models.list()
    assert [m.id for m in models.data] == [MODEL]


async def test_chat_greedy_equals_mlx_lm_and_reports_usage(tiny, serve):
    s = await serve()
    r = await s.client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=N,
                                               temperature=0)
    prompt = s.engine.prompt_tokens(MESSAGES)  # the chat template's tokens, as submit runs them
    assert r.choices[0].message.content == tiny.tokenizer.decode(
        reference_tokens(tiny.model, prompt, N))
    assert r.choices[0].finish_reason == "length"
    assert r.object == "chat.completion" and r.model == MODEL
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (len(prompt), N)
    assert r.usage.total_tokens == len(prompt) + N
    assert r.usage.prompt_tokens_details.cached_tokens == 0
    assert [f.tag for f in s.engine.finished_requests()] == ["api"]


async def test_second_turn_reuses_the_first_turns_kv(serve):
    s = await serve()
    first = await s.client.chat.completions.create(model=MODEL, messages=MESSAGES,
                                                   max_tokens=N, temperature=0)
    turn2 = MESSAGES + [{"role": "assistant", "content": first.choices[0].message.content},
                        {"role": "user", "content": "And then?"}]
    second = await s.client.chat.completions.create(model=MODEL, messages=turn2, max_tokens=N,
                                                    temperature=0)
    assert second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens
    assert second.usage.prompt_tokens_details.cached_tokens < second.usage.prompt_tokens
    assert s.engine.finished_requests()[-1].cached_tokens == \
        second.usage.prompt_tokens_details.cached_tokens


async def test_chat_stream_with_usage_equals_the_whole_reply(tiny, serve):
    s = await serve()
    whole = await s.client.chat.completions.create(model=MODEL, messages=MESSAGES,
                                                   max_tokens=N, temperature=0)
    stream = await s.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=N, temperature=0, stream=True,
        stream_options={"include_usage": True})
    chunks = [c async for c in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "length" and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == N
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens > 0  # same prompt again
    assert all(c.usage is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1


async def test_text_completion_exact_stream_and_not(tiny, serve):
    s = await serve()
    prompt = [5, 70, 33, 101, 9, 42]
    expect = tiny.tokenizer.decode(reference_tokens(tiny.model, prompt, N))
    r = await s.client.completions.create(model=MODEL, prompt=prompt, max_tokens=N,
                                          temperature=0)
    assert r.choices[0].text == expect and r.object == "text_completion"
    assert r.usage.prompt_tokens == len(prompt) and r.usage.completion_tokens == N
    stream = await s.client.completions.create(model=MODEL, prompt=prompt, max_tokens=N,
                                               temperature=0, stream=True)
    parts = [c async for c in stream]
    assert "".join(c.choices[0].text for c in parts) == expect
    assert parts[-1].choices[0].finish_reason == "length"


async def test_text_prompt_is_tokenized_without_a_template(tiny, serve):
    s = await serve()
    r = await s.client.completions.create(model=MODEL, prompt="Once upon", max_tokens=4,
                                          temperature=0)
    ids = tiny.tokenizer.encode("Once upon")
    assert r.usage.prompt_tokens == len(ids)
    assert r.choices[0].text == tiny.tokenizer.decode(reference_tokens(tiny.model, ids, 4))


async def test_sampling_parameters_reach_the_engine(serve):
    s = await serve()
    kwargs = dict(model=MODEL, messages=MESSAGES, max_completion_tokens=N, temperature=0.9,
                  top_p=0.8, seed=1234, stop=["zz", "q"],
                  extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.2})
    a = await s.client.chat.completions.create(**kwargs)
    b = await s.client.chat.completions.create(**kwargs)
    assert a.choices[0].message.content == b.choices[0].message.content  # seeded
    direct = s.engine.submit(messages=MESSAGES, params=SamplingParams(
        temperature=0.9, top_p=0.8, top_k=20, min_p=0.05, repetition_penalty=1.2, seed=1234,
        max_tokens=N, stop=("zz", "q")))
    assert await direct.result() == a.choices[0].message.content
    assert "q" not in a.choices[0].message.content
    assert s.engine.finished_requests()[0].seed == 1234


async def test_neutral_and_unknown_fields_are_accepted(serve):
    s = await serve()
    r = await s.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=3, presence_penalty=0, frequency_penalty=0,
        n=1, user="someone", extra_body={"tools": [], "some_vendor_field": {"x": 1}})
    assert r.usage.completion_tokens == 3


async def test_content_parts_and_developer_role(tiny, serve):
    s = await serve()
    parts = [{"role": "developer", "content": "Be brief."},
             {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                          {"type": "text", "text": "there"}]}]
    a = await s.client.chat.completions.create(model=MODEL, messages=parts, max_tokens=N,
                                               temperature=0)
    b = await s.client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=N,
                                               temperature=0)
    assert a.choices[0].message.content == b.choices[0].message.content
    assert a.usage.prompt_tokens == b.usage.prompt_tokens
