"""Every error status in OpenAI's JSON shape; keys, body limit, queue full, shutdown, CORS and
the refusal to listen beyond loopback without a key."""

import asyncio
import json

import aiohttp
import openai
import pytest

from app.backend import LocalTarget
from app.server import ApiServer, ServerConfig
from tests.api_clients import openai_client
from tests.server.conftest import MODEL, wait_for

CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}


async def post(url, body, headers=None, raw=None):
    async with aiohttp.ClientSession() as http, http.post(
            url + "/v1/chat/completions", data=raw if raw is not None else json.dumps(body),
            headers={"Content-Type": "application/json", **(headers or {})}) as r:
        return r.status, r.headers, await r.json()


def assert_error_shape(body, param=None, code=None):
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"] and error["param"] == param
    if code is not None:
        assert error["code"] == code


@pytest.mark.parametrize(("field", "value", "says"), [
    ("temperature", -1, "'temperature' must be >= 0"),
    ("top_p", 0, "'top_p' must be in (0, 1]"),
    ("top_k", "3", "'top_k' must be an integer"),
    ("max_tokens", 0, "'max_tokens' must be >= 1"),
    ("stop", [1], "'stop' must be"),
    ("n", 9, "'n' must be <= 8"),
    ("n", 0, "'n' must be >= 1"),
    ("top_logprobs", 30, "'top_logprobs' must be <= 20"),
    ("seed", -5, "'seed' must be >= 0"),
    ("repetition_penalty", 0, "'repetition_penalty' must be > 0"),
    ("messages", [], "'messages' must be"),
    ("presence_penalty", 0.5, "'presence_penalty' is not supported"),
    ("presence_penalty", False, "'presence_penalty' is not supported"),  # false is not 0
    ("temperature", 10**400, "'temperature' must be a number"),  # no float: was a 500
    ("top_p", -(10**400), "'top_p' must be a number"),
])
async def test_400_names_the_field(serve, field, value, says):
    s = await serve()
    with pytest.raises(openai.BadRequestError) as caught:
        await s.client.chat.completions.create(**CHAT, extra_body={field: value})
    assert caught.value.status_code == 400
    assert caught.value.body["param"] == field
    assert caught.value.body["message"].startswith(says)
    assert s.engine.finished_requests() == []  # nothing reached the engine


async def test_400_for_bad_bodies(serve):
    s = await serve()
    status, _, body = await post(s.url, None, raw="{not json")
    assert status == 400 and "not valid JSON" in body["error"]["message"]
    assert_error_shape(body, code="invalid_json")
    status, _, body = await post(s.url, [1, 2])
    assert status == 400 and body["error"]["message"] == "the request body must be a JSON object"
    bad = CHAT | {"messages": [{"role": "user", "content": "a"}, {"role": "robot",
                                                                   "content": "b"}]}
    status, _, body = await post(s.url, bad)
    assert status == 400 and body["error"]["param"] == "messages[1].role"


async def test_401_without_the_right_key(serve):
    s = await serve(api_key="s3cret")
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
        status, _, body = await post(s.url, CHAT, headers)
        assert status == 401
        assert_error_shape(body, code="invalid_api_key")
    r = await s.client.chat.completions.create(**CHAT)  # the client sends the right one
    assert r.usage.completion_tokens == 4
    bad = openai_client(s.url + "/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        await bad.models.list()
    await bad.close()
    async with aiohttp.ClientSession() as http, http.get(s.url + "/health") as r:
        assert r.status == 200  # liveness needs no key


async def test_404_for_an_unknown_model_and_route(serve):
    s = await serve(strict_model_name=True)  # by default any name is taken (model_names.py)
    with pytest.raises(openai.NotFoundError) as caught:
        await s.client.chat.completions.create(**(CHAT | {"model": "gpt-4o"}))
    assert caught.value.body["param"] == "model"
    assert caught.value.body["code"] == "model_not_found"
    async with aiohttp.ClientSession() as http, http.get(s.url + "/v1/nothing") as r:
        assert r.status == 404
        assert_error_shape(await r.json(), code="not_found")


async def test_413_for_an_oversized_body(serve):
    s = await serve(max_body_bytes=2048)
    big = CHAT | {"messages": [{"role": "user", "content": "x" * 4096}]}
    status, _, body = await post(s.url, big)
    assert status == 413
    assert_error_shape(body, code="request_too_large")
    assert "2048 bytes" in body["error"]["message"]


async def test_429_with_retry_after_when_the_queue_is_full(serve):
    s = await serve(engine={"max_concurrent": 1, "max_queue": 0, "context_length": 100_000},
                    retry_after_s=2)
    first = await s.client.completions.create(model=MODEL, prompt=[1, 2], max_tokens=50_000,
                                              temperature=0, stream=True)
    await anext(aiter(first))  # running: the one slot is taken, no room to wait
    with pytest.raises(openai.RateLimitError) as caught:
        await s.client.chat.completions.create(**CHAT)
    assert caught.value.status_code == 429
    assert caught.value.response.headers["Retry-After"] == "2"
    assert caught.value.body["code"] == "queue_full"
    await first.close()


async def test_503_while_shutting_down_and_inflight_streams_end(serve):
    s = await serve(engine={"context_length": 100_000})
    stream = await s.client.completions.create(model=MODEL, prompt=[1, 2], max_tokens=50_000,
                                               temperature=0, stream=True)
    await anext(aiter(stream))
    stopping = asyncio.create_task(s.server.stop(grace_s=30))
    await wait_for(lambda: s.server.closing)
    status, _, body = await post(s.url, CHAT)  # the socket is still open, the door is not
    assert status == 503
    assert_error_shape(body, code="shutting_down")
    await stream.close()  # the in-flight client leaves: stop() need not wait out the grace
    await asyncio.wait_for(stopping, 10)
    assert not s.server.running
    await wait_for(lambda: bool(s.engine.finished_requests()))  # on the engine's next tick
    assert s.engine.finished_requests()[-1].finish_reason == "cancelled"


async def test_stop_cancels_inflight_streams_which_end_cleanly(serve):
    s = await serve(engine={"context_length": 100_000})
    stream = await s.client.chat.completions.create(**(CHAT | {"max_tokens": 50_000}),
                                                    stream=True)
    await anext(aiter(stream))
    stopping = asyncio.create_task(s.server.stop())
    rest = [c async for c in stream]  # ends (with [DONE]) instead of hanging
    await asyncio.wait_for(stopping, 10)
    assert rest[-1].choices[0].finish_reason == "cancelled"


async def test_no_cors_unless_asked(serve):
    plain = await serve()
    allowed = await serve(cors_origin="http://localhost:3000")
    async with aiohttp.ClientSession() as http:
        async with http.get(plain.url + "/v1/models",
                            headers={"Origin": "http://evil.example"}) as r:
            assert "Access-Control-Allow-Origin" not in r.headers
        async with http.options(allowed.url + "/v1/chat/completions") as r:
            assert r.status == 204
            assert r.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"


async def test_refuses_a_non_loopback_address_without_a_key(make_engine):
    engine = make_engine()
    target = LocalTarget(engine)
    server = ApiServer(lambda: target, lambda: MODEL, ServerConfig(host="0.0.0.0", port=0))
    with pytest.raises(ValueError, match="without an API key"):
        await server.start()
    assert not server.running


async def test_503_while_no_model_is_loaded():
    server = ApiServer(lambda: None, lambda: None, ServerConfig(port=0))
    url = await server.start()
    try:
        status, headers, body = await post(url, CHAT)
        assert status == 503 and headers["Retry-After"] == "1"
        assert_error_shape(body, code="model_not_ready")
    finally:
        await server.stop()
