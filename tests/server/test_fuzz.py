"""Property-based fuzzing of a real server on loopback with schemathesis, from its own
GET /openapi.json: requests the document allows and requests it forbids, for every operation.

Checked on every response: no 5xx, every error in OpenAI's JSON shape (Anthropic's under
/v1/messages), the status, content
type and body as documented (each SSE event's JSON too), forbidden data refused (4xx),
allowed data served (2xx; the only 400s allowed are the engine's own refusal of a prompt this
model cannot take, code invalid_request: too long for the context, no content, token ids
beyond its vocabulary; and a JSON schema llguidance cannot use, code invalid_schema).
Allowed requests are shaped to stay allowed but be served more often
(`shape`). Afterwards the server is healthy and answers a normal completion.

The fuzz reaches the engine: the server's `on_finished` records each choice whose engine
request ended with tokens generated, and each operation that generates (ENGINE_OPERATIONS)
must have had cases served so, counted around its fuzz; a change that left every case
refused before the engine (a `model` or shape the server stopped taking) fails here.

Bounded for CI: FUZZ_EXAMPLES examples per operation and mode, derandomized (the same cases
every run). BATCHCHAT_FUZZ_EXAMPLES=N runs N per operation and mode from a fresh random seed
each run (docs/server.md).

One test per operation (the same cases as one test walking them all: derandomized cases are
seeded by the inner test function, which is the same), so pytest-xdist spreads the fuzz over
its workers instead of one worker ending the suite with it; the server is shared by a
worker's operations (module scope) and must be healthy after each.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from app.backend import LocalTarget
from app.server import ApiServer, ServerConfig, openapi
from tests.server.conftest import MODEL

FUZZ_EXAMPLES = 25
CONTEXT = 1024  # room for most generated conversations (the tokenizer is byte-level)
MAX_TOKENS = 16  # allowed requests' replies are cut to this many tokens, to stay quick
VOCAB = 256  # token ids the tiny model's tokenizer has (the bytes)
ENV = "BATCHCHAT_FUZZ_EXAMPLES"
ERROR_FIELDS = {"message", "type", "param", "code"}
ANTHROPIC = "/v1/messages"  # the paths answered in Anthropic's shapes
RESPONSES = "/v1/responses"  # OpenAI's Responses API: its own body shapes
# the operations whose allowed cases generate tokens: each must have had some served
ENGINE_OPERATIONS = {"POST /v1/chat/completions", "POST /v1/completions", "POST /v1/messages",
                     "POST /v1/responses"}
FLOOR_EXAMPLES = 10  # fewer examples a run (BATCHCHAT_FUZZ_EXAMPLES) may all be refused


@dataclass
class EngineServed:
    """The server's `on_finished` (called on its loop's thread): each choice whose engine
    request ended with tokens generated, counted; `count` read from the test's thread."""
    count: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, stats: Any) -> None:
        if stats.generated_tokens > 0 and stats.error is None:
            with self.lock:
                self.count += 1

    def now(self) -> int:
        with self.lock:
            return self.count


def floor_applies() -> bool:
    """Whether this run has enough examples per operation to hold it to reaching the engine."""
    more = os.environ.get(ENV)
    return not more or int(more) >= FLOOR_EXAMPLES


@contextmanager
def server_thread(make_engine: Callable[..., Any],
                  on_finished: Callable[[Any], None] | None = None) -> Iterator[str]:
    """A real ApiServer on 127.0.0.1 on its own loop in a thread (the fuzzer's HTTP client
    is synchronous); its base URL."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fuzz-server", daemon=True)
    thread.start()

    def run(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(60)

    engine = make_engine(context_length=CONTEXT)

    async def start() -> tuple[ApiServer, str]:
        await engine.start()
        target = LocalTarget(engine)
        server = ApiServer(lambda: target, lambda: MODEL,
                           ServerConfig(port=0, default_max_tokens=8),
                           on_finished=on_finished)
        return server, await server.start()

    server, url = run(start())
    try:
        yield url
    finally:
        run(server.stop())
        run(engine.shutdown())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def error_shape(ctx: Any, response: Any, case: Any) -> None:
    """Every 4xx/5xx is {"error": {"message", "type", "param", "code"}}, a non-empty message;
    under /v1/messages Anthropic's {"type": "error", "error": {"type", "message"}}."""
    if response.status_code < 400:
        return
    body = json.loads(response.content)
    if case.path.startswith(ANTHROPIC):
        assert set(body) == {"type", "error"} and body["type"] == "error", body
        assert set(body["error"]) == {"type", "message"}, body
    else:
        assert set(body) == {"error"}, body
        assert set(body["error"]) == ERROR_FIELDS, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body


def allowed_data_served(ctx: Any, response: Any, case: Any) -> None:
    """What the document allows is served; the one 400 allowed is the engine's refusal of a
    prompt this model cannot take (code invalid_request, not a field's invalid_value)."""
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return
    if case.path == RESPONSES + "/{id}" and response.status_code == 404:
        return  # any id is allowed; one that was never stored is not found
    if response.status_code == 400:
        error = json.loads(response.content)["error"]
        # Anthropic's error body has no code: the server sends it as a header
        code = response.headers.get("x-batchchat-error-code", [None])[0] \
            if case.path.startswith(ANTHROPIC) else error["code"]  # (headers: lists)
        if case.path == "/v1/embeddings" and "cannot be pooled" in error["message"]:
            return  # a GGUF chat model is not pooled without --embedding-model (server.md)
        assert code in ("invalid_request", "invalid_schema"), error
        return
    assert 200 <= response.status_code < 300, response.content[:500]


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance, negative_data_rejection]


def shape(body: dict[str, Any], stream: bool, path: str) -> None:
    """Keep an allowed request allowed but more often served: short replies, token ids in
    the vocabulary, streamed half the time."""
    for name in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        if isinstance(body.get(name), int | float):
            body[name] = min(body[name], MAX_TOKENS)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], list):
        prompt = prompt[0]
    if isinstance(prompt, list):
        prompt[:] = [int(t) % VOCAB if isinstance(t, int | float) else t for t in prompt]
    if stream and body.get("stream") is None:
        body["stream"] = True
    for message in body.get("messages") or ():  # arguments: a JSON object as text (the
        for call in (message.get("tool_calls") or []) if isinstance(message, dict) else ():
            fn = call.get("function") if isinstance(call, dict) else None  # document's
            if isinstance(fn, dict) and fn.get("arguments", "{}") != "" \
                    and not _json_object(fn.get("arguments", "{}")):
                fn["arguments"] = "{}"  # contentSchema, which schemathesis does not read)
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else ():  # a file it can read:
            file = part.get("file") if isinstance(part, dict) else None  # the document
            if part.get("type") == "file" and isinstance(file, dict):  # cannot say it
                file["file_data"] = "data:text/plain;base64,ZnV6eiBub3Rl"  # "fuzz note"
                file.pop("filename", None)
            if isinstance(part, dict) and part.get("type") == "image_url":  # the tiny model
                part.clear()  # reads text only: its 400 is test_image_parts_api's
                part.update({"type": "text", "text": "an image was here"})
    if path == RESPONSES:
        _shape_responses(body)
    tools = body.get("tools")
    if isinstance(tools, list):  # what JSON Schema cannot say: distinct names, and
        for i, tool in enumerate(tools):  # a tool_choice that names one of them
            if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
                tool["function"]["name"] = f"f{i}"
            elif isinstance(tool, dict) and path.startswith((ANTHROPIC, RESPONSES)):
                tool["name"] = f"f{i}"
    choice = body.get("tool_choice")
    if choice not in (None, "none") and not tools:
        del body["tool_choice"]
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        choice["function"]["name"] = "f0"
    elif isinstance(choice, dict) and choice.get("type") in ("tool", "function"):
        choice["name"] = "f0"  # Anthropic's and the Responses API's
    messages = body.get("messages")
    if path.startswith(ANTHROPIC) and isinstance(messages, list) and messages \
            and isinstance(messages[-1], dict) and messages[-1].get("role") == "assistant":
        # no prefill: the document says it, JSON Schema cannot (an array's last item)
        messages.append({"role": "user", "content": "Go on."})


def _shape_responses(body: dict[str, Any]) -> None:
    """A Responses body: no previous_response_id (a random id is not stored: a 400), and
    function_call items' arguments a JSON object as text (the document's contentSchema)."""
    body.pop("previous_response_id", None)
    items = body.get("input")
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("type") == "function_call" \
                and not _json_object(item.get("arguments")):
            item["arguments"] = "{}"


def _json_object(text: Any) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (TypeError, ValueError):
        return False


def fuzz(operation: Any, mode: GenerationMode, url: str, examples: int,
         derandomize: bool) -> None:
    session = requests.Session()

    @settings(max_examples=examples, deadline=None, database=None, derandomize=derandomize,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode), stream=st.booleans())
    def one(case: Any, stream: bool) -> None:
        body = case.body
        # `model` needs no help: the served document lists the served id (and, one model
        # being served, takes any other name), so allowed cases reach the engine
        if mode is GenerationMode.POSITIVE and isinstance(body, dict):
            shape(body, stream, case.path)
        response = case.call(base_url=url, session=session, timeout=60)
        case.validate_response(response, checks=CHECKS,
                               additional_checks=[error_shape, allowed_data_served])

    one()


def operation_names(document: dict[str, Any]) -> list[str]:
    """"METHOD /path" for each operation of an OpenAPI document but GET /openapi.json itself
    (schemathesis leaves the schema's own URL out)."""
    return [f"{method.upper()} {path}" for path, methods in document["paths"].items()
            for method in methods if path != "/openapi.json"]


def served_operations(url: str) -> dict[str, Any]:
    """The server's own /openapi.json as schemathesis reads it: its operations by name."""
    schema = schemathesis.openapi.from_url(url + "/openapi.json")
    operations = (result.ok() for result in schema.get_all_operations())
    return {f"{op.method.upper()} {op.path}": op for op in operations}


def fuzz_operation(operation: Any, url: str) -> None:
    """Both modes on one operation (the GETs take nothing to get wrong: allowed data only)."""
    more = os.environ.get(ENV)
    examples, derandomize = (int(more), False) if more else (FUZZ_EXAMPLES, True)
    fuzz(operation, GenerationMode.POSITIVE, url, examples, derandomize)
    if operation.method.lower() == "post":
        fuzz(operation, GenerationMode.NEGATIVE, url, examples, derandomize)


OPERATIONS = operation_names(openapi.document())


SERVED = EngineServed()  # the module's server's count (one server per worker)


@pytest.fixture(scope="module")
def fuzzed_url(tiny: Any) -> Iterator[str]:
    """One server for a worker's run of this module's tests (make_engine, module-scoped);
    SERVED counts what its engine served."""
    from engine import Engine, EngineConfig

    def make_engine(context_length: int) -> Any:
        return Engine(tiny.model, tiny.tokenizer, eos_token_ids=[],
                      context_length=context_length, config=EngineConfig(),
                      description="tiny test model")

    with server_thread(make_engine, SERVED) as url:
        yield url


def test_every_operation_of_the_served_document_is_fuzzed(fuzzed_url):
    assert sorted(served_operations(fuzzed_url)) == sorted(OPERATIONS)
    # all but GET /openapi.json itself
    assert len(OPERATIONS) == sum(map(len, openapi.document()["paths"].values())) - 1


@pytest.mark.parametrize("name", OPERATIONS)
def test_fuzz_an_operation_then_the_server_is_healthy(fuzzed_url, name):
    before = SERVED.now()
    fuzz_operation(served_operations(fuzzed_url)[name], fuzzed_url)
    served = SERVED.now() - before
    print(f"{name}: {served} engine requests served")  # -s shows them
    if name in ENGINE_OPERATIONS and floor_applies():
        assert served > 0, f"no case of {name} reached the engine"
    # healthy afterwards: /health, and a normal completion
    assert requests.get(fuzzed_url + "/health", timeout=10).json() == {"status": "ok"}
    r = requests.post(fuzzed_url + "/v1/chat/completions", timeout=60, json={
        "model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 4
