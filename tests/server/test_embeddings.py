"""POST /v1/embeddings on the tiny random-weight model, through the official `openai`
client on loopback: shapes, order, usage, float = base64, dimensions, token-id inputs, an
input's vector alone = in a batch, refusals in OpenAI's shape, and the forward off the loop
while a chat streams. (What the vectors mean is test_embeddings_bundled's: a random model
has no semantics.)"""

from __future__ import annotations

import asyncio
import base64
import math
import struct
import threading

import openai
import pytest

from app.server.embeddings import pooled
from app.server.embeddings.openapi import REQUEST
from app.server.embeddings.request import FIELDS
from tests.api_clients import openai_client

MODEL = "tiny"
TEXTS = ["a", "hello there", "the quick brown fox jumps over the lazy dog",
         "0123456789" * 6, "x y", "Zürich", "another one", "and a last, longer text " * 3]


def norm(v: list[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in v))


def decoded(text: str) -> list[float]:
    raw = base64.b64decode(text)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


async def vectors(client, inputs, **kw) -> list[list[float]]:
    r = await client.embeddings.create(model=MODEL, input=inputs, encoding_format="float",
                                       **kw)
    return [d.embedding for d in r.data]


async def test_many_inputs_one_unit_vector_each_in_order_with_usage(serve):
    s = await serve()
    width = s.engine.model.args.hidden_size
    r = await s.client.embeddings.create(model=MODEL, input=TEXTS, encoding_format="float")
    assert [d.index for d in r.data] == list(range(len(TEXTS)))
    assert all(len(d.embedding) == width and abs(norm(d.embedding) - 1) < 1e-5
               for d in r.data)
    tokens = sum(len(s.engine.tokenizer.encode(t)) for t in TEXTS)
    assert r.usage.prompt_tokens == tokens == r.usage.total_tokens
    assert r.model == MODEL
    # distinct texts, distinct vectors (the order is the request's, not the batch's)
    assert len({tuple(d.embedding) for d in r.data}) == len(TEXTS)
    one = await vectors(s.client, TEXTS[3])
    assert max(abs(a - b) for a, b in zip(one[0], r.data[3].embedding, strict=True)) < 1e-5


async def test_float_and_base64_are_the_same_numbers(serve):
    s = await serve()
    floats = await vectors(s.client, TEXTS[:3])
    r = await s.client.embeddings.create(model=MODEL, input=TEXTS[:3],
                                         encoding_format="base64")
    assert [decoded(d.embedding) for d in r.data] == floats  # float32 both ways: exact
    # the client's default: it asks for base64 and decodes it itself
    default = await s.client.embeddings.create(model=MODEL, input=TEXTS[:3])
    assert [list(map(float, d.embedding)) for d in default.data] == floats


async def test_dimensions_truncate_and_renormalise_or_are_refused(serve):
    s = await serve()
    width = s.engine.model.args.hidden_size
    full = (await vectors(s.client, TEXTS[1]))[0]
    short = (await vectors(s.client, TEXTS[1], dimensions=8))[0]
    assert len(short) == 8 and abs(norm(short) - 1) < 1e-5
    head = norm(full[:8])
    assert max(abs(a - b / head) for a, b in zip(short, full[:8], strict=True)) < 1e-5
    assert len((await vectors(s.client, TEXTS[1], dimensions=width))[0]) == width
    with pytest.raises(openai.BadRequestError) as caught:
        await vectors(s.client, TEXTS[1], dimensions=width + 1)
    assert caught.value.body["param"] == "dimensions" and str(width) in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        await vectors(s.client, TEXTS[1], dimensions=0)
    assert caught.value.body["param"] == "dimensions"


async def test_token_ids_are_the_texts_tokens(serve):
    s = await serve()
    ids = [s.engine.tokenizer.encode(t) for t in TEXTS[:4]]
    by_text = await vectors(s.client, TEXTS[:4])
    assert await vectors(s.client, ids) == by_text
    # one input alone against the same text alone: a batch of four is another matrix shape,
    # whose rounding may differ by a last bit (the next test bounds that)
    assert await vectors(s.client, ids[2]) == await vectors(s.client, TEXTS[2])


async def test_an_inputs_vector_does_not_depend_on_its_batch(serve):
    """Right padding under the causal mask: the other inputs (and the padding to the
    longest) leave an input's vector alone, up to the rounding of another matrix shape."""
    s = await serve()
    together = await vectors(s.client, TEXTS)
    alone = [(await vectors(s.client, t))[0] for t in TEXTS]
    worst = max(abs(a - b) for x, y in zip(together, alone, strict=True)
                for a, b in zip(x, y, strict=True))
    assert worst < 1e-5, worst
    # and split into several forwards by the token budget: the same vectors
    ids = [s.engine.tokenizer.encode(t) for t in TEXTS]
    split = pooled.embed(s.engine.model, ids, budget=64)
    assert len(pooled.batches(ids, budget=64)) > 1
    assert max(abs(a - b) for x, y in zip(split, together, strict=True)
               for a, b in zip(x, y, strict=True)) < 1e-5


@pytest.mark.parametrize(("inputs", "says"), [
    ("", "input[0] is empty"),
    (["ok", ""], "input[1] is empty"),
    ([], "'input'"),
    (["ok", [1, 2]], "mixes"),
    ([[1, 2], [-1]], "input[1] has a negative"),
    ([[1, 2], [1, 10**6]], "input[1] has the token id 1000000"),
])
async def test_bad_inputs_are_400s_naming_the_input(serve, inputs, says):
    s = await serve()
    with pytest.raises(openai.BadRequestError) as caught:
        await vectors(s.client, inputs)
    assert caught.value.body["param"] == "input" and says in caught.value.message


async def test_an_input_longer_than_the_context_is_refused_by_index(serve):
    s = await serve(engine={})
    limit = s.engine.context_length
    with pytest.raises(openai.BadRequestError) as caught:
        await vectors(s.client, [[1] * 4, [1] * (limit + 1)])
    assert caught.value.body["code"] == "invalid_request"
    assert f"input[1] has {limit + 1} tokens" in caught.value.message
    assert len((await vectors(s.client, [[1] * limit]))[0]) > 0  # the limit itself is fine


async def test_other_fields(serve):
    s = await serve()
    r = await s.client.embeddings.create(model=MODEL, input="hi", encoding_format="float",
                                         user="someone", extra_body={"unknown": 1})
    assert len(r.data) == 1
    with pytest.raises(openai.BadRequestError) as caught:
        await s.client.embeddings.create(model=MODEL, input="hi",
                                         extra_body={"encoding_format": "int8"})
    assert caught.value.body["param"] == "encoding_format"
    assert set(REQUEST["properties"]) | {"model"} == set(FIELDS)


async def test_forwards_run_off_the_loop_while_a_chat_streams(serve, monkeypatch):
    """Many requests at once: each forward runs on the embeddings thread, never the event
    loop's, and a chat streaming meanwhile on the engine's thread gets all its tokens."""
    s = await serve()
    threads: set[str] = set()
    embed = pooled.embed

    def recording(*args, **kwargs):
        threads.add(threading.current_thread().name)
        return embed(*args, **kwargs)

    monkeypatch.setattr(pooled, "embed", recording)
    chat = asyncio.ensure_future(s.client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=24))
    replies = await asyncio.gather(*(vectors(s.client, TEXTS) for _ in range(8)))
    assert all(r == replies[0] for r in replies)
    assert (await chat).usage.completion_tokens == 24
    assert threads == {"embeddings"} and threading.current_thread().name not in threads


async def test_serve_with_an_embedding_model_as_a_real_process(tiny_dir):
    """`batchchat serve --embedding-model DIR`: that model answers /v1/embeddings (loaded
    on the forward thread at the first request), beside the chat model."""
    import os
    import sys
    from pathlib import Path

    from tests.server.test_serve_command import read_until

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "batchchat", "serve", "--model", str(tiny_dir), "--port", "0",
        "--served-model-name", "tiny", "--embedding-model", str(tiny_dir),
        cwd=Path(__file__).resolve().parents[2], stdout=asyncio.subprocess.PIPE,
        env=os.environ | {"BATCHCHAT_API_KEY": ""})
    try:
        url = (await read_until(proc, "ready at")).split("ready at ", 1)[1].split()[0]
        async with openai_client(url, api_key="unused", max_retries=0) as client:
            r = await client.embeddings.create(model="anything", input=TEXTS,
                                               encoding_format="float")
            assert r.model == tiny_dir.name and len(r.data) == len(TEXTS)
            assert all(abs(norm(d.embedding) - 1) < 1e-5 for d in r.data)
    finally:
        proc.terminate()
        await proc.wait()


def test_serve_refuses_an_embedding_model_that_is_not_local(capsys, monkeypatch):
    from app.main import main

    monkeypatch.setenv("BATCHCHAT_NO_BLAS_PRELOAD", "1")  # no re-exec of the test process
    with pytest.raises(SystemExit) as caught:
        main(["serve", "--model", "unused", "--embedding-model", "someone/some-repo"])
    assert caught.value.code == 2
    assert "--embedding-model" in capsys.readouterr().err


@pytest.fixture(scope="module")
def gguf_dir(tmp_path_factory):
    """Two tiny random GGUF models for a fleet."""
    from tests.fleet_models import tiny_gguf

    d = tmp_path_factory.mktemp("embeddings-fleet")
    for i, name in enumerate("ab"):
        tiny_gguf(d / f"tiny-{name}.gguf", seed=i)
    return d


async def test_a_fleet_loads_the_named_model_and_says_when_it_cannot_pool_it(gguf_dir):
    """With several models (#50) the request's `model` is loaded just in time, as for chat;
    a GGUF's mlx-lm weights are lazy on its loading thread, so the 400 names the way out
    (--embedding-model); an unknown name is the fleet's 404."""
    from tests.server.test_fleet_api import fleet_server

    async with fleet_server(gguf_dir) as f:
        with pytest.raises(openai.BadRequestError) as caught:
            await f.client.embeddings.create(model="tiny-a", input="hi")
        assert "--embedding-model" in caught.value.message
        listed = {m.id: m.model_extra["state"] for m in (await f.client.models.list()).data}
        assert listed["tiny-a"] == "loaded" and listed["tiny-b"] == "available"
        with pytest.raises(openai.NotFoundError):
            await f.client.embeddings.create(model="nope", input="hi")
