"""16 concurrent streaming clients batch together; a client that leaves cancels its request;
logprobs streamed and not, exact against mlx-lm's logits; /metrics counts what was served."""

import asyncio

import aiohttp
import mlx.core as mx
import pytest

from engine.chat_prompt import chat_tokens
from tests.engine.conftest import reference_tokens
from tests.server.conftest import MODEL, wait_for

N = 64  # long enough that all 16 are in flight together however the requests trickle in


async def test_sixteen_streaming_clients_share_the_batch(tiny, serve):
    s = await serve(engine={"max_concurrent": 16})
    prompts = [[(7 * i + j) % 250 + 1 for j in range(3 + i % 5)] for i in range(16)]

    async def one(prompt):
        stream = await s.client.completions.create(model=MODEL, prompt=prompt, max_tokens=N,
                                                   temperature=0, stream=True)
        return "".join([c.choices[0].text async for c in stream])

    texts = await asyncio.gather(*(one(p) for p in prompts))
    for prompt, text in zip(prompts, texts, strict=True):
        assert text == tiny.tokenizer.decode(reference_tokens(tiny.model, prompt, N))
    assert max(t.decode_rows for t in s.engine.telemetry()) >= 8
    finished = s.engine.finished_requests()
    assert len(finished) == 16 and {f.tag for f in finished} == {"api"}


async def test_client_disconnect_cancels_the_request(serve):
    reported = []
    s = await serve(engine={"context_length": 100_000}, on_finished=reported.append)
    stream = await s.client.completions.create(model=MODEL, prompt=[1, 2, 3], stream=True,
                                               max_tokens=50_000, temperature=0)
    got = 0
    async for _ in stream:
        got += 1
        if got == 3:
            break
    await stream.close()  # drops the connection mid-stream
    await wait_for(lambda: bool(s.engine.finished_requests()))
    (done,) = s.engine.finished_requests()
    assert done.finish_reason == "cancelled" and done.generated_tokens < 50_000
    assert s.server._streams == set()
    await wait_for(lambda: bool(reported))  # the stats of a request its client left
    assert [r.finish_reason for r in reported] == ["cancelled"]
    assert reported[0].request_id == done.request_id


def reference_logprobs(model, prompt, tokens):
    logits = model(mx.array([prompt + tokens]))[0].astype(mx.float32)
    rows = logits[len(prompt) - 1 : len(prompt) - 1 + len(tokens)]
    return rows - mx.logsumexp(rows, axis=-1, keepdims=True)


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_logprobs_match_mlx_lm(tiny, serve, stream):
    s = await serve()
    messages = [{"role": "user", "content": "Logprobs please"}]
    r = await s.client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8,
                                               temperature=0, logprobs=True, top_logprobs=3,
                                               stream=stream)
    if stream:
        content = [e for c in [c async for c in r] if c.choices and c.choices[0].logprobs
                   for e in c.choices[0].logprobs.content]
    else:
        content = r.choices[0].logprobs.content
    prompt = chat_tokens(tiny.tokenizer, messages, s.engine._vocab_size(), frozenset())
    tokens = reference_tokens(tiny.model, prompt, 8)
    lp = reference_logprobs(tiny.model, prompt, tokens)
    assert len(content) == 8
    for pos, (token, entry) in enumerate(zip(tokens, content, strict=True)):
        assert entry.token == tiny.tokenizer.decode([token])
        assert entry.logprob == pytest.approx(lp[pos, token].item(), abs=2e-4)
        assert entry.bytes == list(entry.token.encode())
        best = mx.argsort(-lp[pos])[:3].tolist()
        assert [t.token for t in entry.top_logprobs] == [tiny.tokenizer.decode([b])
                                                          for b in best]
        assert entry.top_logprobs[0].logprob == pytest.approx(lp[pos, best[0]].item(), abs=2e-4)


async def test_completion_logprobs_legacy_shape(tiny, serve):
    s = await serve()
    prompt = [10, 20, 30]
    r = await s.client.completions.create(model=MODEL, prompt=prompt, max_tokens=5,
                                          temperature=0, logprobs=2)
    tokens = reference_tokens(tiny.model, prompt, 5)
    lp = reference_logprobs(tiny.model, prompt, tokens)
    got = r.choices[0].logprobs
    assert got.tokens == [tiny.tokenizer.decode([t]) for t in tokens]
    assert got.token_logprobs == pytest.approx([lp[i, t].item() for i, t in enumerate(tokens)],
                                               abs=2e-4)
    assert all(len(top) == 2 for top in got.top_logprobs)
    assert got.text_offset[0] == 0 and got.text_offset[1] == len(got.tokens[0])


async def test_metrics_in_prometheus_text(serve):
    s = await serve()
    await s.client.completions.create(model=MODEL, prompt=[1, 2], max_tokens=4, temperature=0)
    async with aiohttp.ClientSession() as http, http.get(s.url + "/metrics") as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
        text = await r.text()
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines()
                 if line and not line.startswith("#"))
    assert lines["batchchat_generation_tokens_total"] == "4"
    assert lines["batchchat_num_requests_running"] == "0"
    assert lines["batchchat_num_requests_waiting"] == "0"
    assert lines["batchchat_time_to_first_token_seconds_count"] == "1"
    assert lines["batchchat_inter_token_latency_seconds_count"] == "3"
    assert lines['batchchat_time_to_first_token_seconds_bucket{le="+Inf"}'] == "1"
    assert lines['batchchat_request_success_total{finished_reason="length"}'] == "1"
    assert lines['batchchat_http_requests_total{endpoint="/v1/completions",status="200"}'] \
        == "1"
    for name in ("kv_cache_usage_perc", "prefix_cache_hits_total", "prefix_cache_queries_total",
                 "prompt_tokens_total"):
        assert "batchchat_" + name in lines
    assert 0.0 < float(lines["batchchat_kv_cache_usage_perc"]) <= 1.0
    # stalls (issue #26): the 3 gaps between the 4 tokens, none running now
    assert 0.0 < float(lines["batchchat_inter_token_gap_p99_seconds"]) \
        <= float(lines["batchchat_inter_token_gap_max_seconds"])
    assert float(lines["batchchat_stream_stall_seconds"]) == 0.0
