"""GET /openapi.json holds to the server: the same routes as the app registers, the same
request fields as the parsers read, and every documented bound is where the validator puts it."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
import schemathesis

from app.request import Refusal
from app.server import openapi, schemas
from app.server.anthropic.request import parse_count, parse_messages
from app.server.errors import status_of
from app.server.responses_api import request as responses_api
from tests.server.conftest import MODEL

CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "logprobs": True}
COMPLETION = {"model": MODEL, "prompt": "Hi"}
MESSAGES = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
            "metadata": None, "system": "Be brief.", "thinking": None,
            "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "auto"}, "output_config": {"effort": "low"}}
RESPONSES = {"model": MODEL, "input": "Hi", "instructions": "Be brief.",
             "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
             "tool_choice": "auto", "text": {"format": {"type": "text"}},
             "reasoning": {"effort": "low"}}
COUNT = {k: v for k, v in MESSAGES.items() if k not in ("max_tokens", "metadata")}


def parse_responses(body: Any, context_length: int) -> Any:
    """What POST /v1/responses reads (its handler's reads of store and
    previous_response_id too)."""
    responses_api.store_of(body)
    responses_api.previous_of(body)
    items = responses_api.input_items(body.get("input"))
    return responses_api.parse_responses(body, items, context_length)


class Reads(dict):
    """A body that records every field the parser reads from it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)


def properties(path: str) -> dict[str, Any]:
    body = openapi.document()["paths"][path]["post"]["requestBody"]["content"]
    return body["application/json"]["schema"]["properties"]


async def test_every_registered_route_is_documented_and_served(serve):
    s = await serve()
    routes = {(r.method.lower(), r.resource.canonical)
              for r in s.server._runner.app.router.routes() if r.method != "HEAD"}
    documented = {(method, path) for path, ops in openapi.document()["paths"].items()
                  for method in ops}
    assert routes == documented
    async with aiohttp.ClientSession() as http, http.get(s.url + "/openapi.json") as r:
        assert r.status == 200 and r.content_type == "application/json"
        assert await r.json() == openapi.document([MODEL])  # with the served model's names


def test_the_document_is_valid_openapi():
    schemathesis.openapi.from_dict(openapi.document()).validate()  # its OpenAPI 3.1 schema


@pytest.mark.parametrize(("path", "body", "parse"), [
    ("/v1/chat/completions", CHAT, schemas.parse_chat),
    ("/v1/completions", COMPLETION, schemas.parse_completion),
    ("/v1/messages", MESSAGES, parse_messages),
    ("/v1/messages/count_tokens", COUNT, lambda body, _: parse_count(body)),
    ("/v1/responses", RESPONSES, parse_responses),
])
def test_documented_fields_are_the_fields_the_parser_reads(path, body, parse):
    reads = Reads(body)
    parse(reads, 16)
    assert reads.read == set(properties(path))
    required = openapi.document()["paths"][path]["post"]["requestBody"]["content"][
        "application/json"]["schema"]["required"]
    for name in required:  # each required field refused when missing
        with pytest.raises(Refusal) as caught:
            parse({k: v for k, v in body.items() if k != name}, 16)
        assert caught.value.param == name


def bounds(schema: dict[str, Any]) -> list[tuple[Any, bool]]:
    """(value, accepted) pairs on both sides of each documented numeric bound."""
    alt = schema["anyOf"][0] if "anyOf" in schema else schema
    step = 1 if alt.get("type") == "integer" else 1e-6
    out = []
    if "minimum" in alt:
        out += [(alt["minimum"], True), (alt["minimum"] - step, False)]
    if "exclusiveMinimum" in alt:
        out += [(alt["exclusiveMinimum"], False), (alt["exclusiveMinimum"] + step, True)]
    if "maximum" in alt:
        out += [(alt["maximum"], True), (alt["maximum"] + step, False)]
    if "exclusiveMaximum" in alt:
        out += [(alt["exclusiveMaximum"], False), (alt["exclusiveMaximum"] - step, True)]
    if alt.get("type") in ("integer", "number"):
        out += [("1", False), (True, False), (None, True)]
    if alt.get("type") == "integer":  # JSON Schema's integers: 2.0 is one, 2.5 is not
        low = alt.get("minimum", 0)
        out += [(float(low), True), (low + 0.5, False)]
    if "enum" in alt:  # the fields accepted only at their neutral value
        out += [(v, True) for v in alt["enum"]] + [("x", False), (0.5, False), (True, False)]
    return out


CASES = [(path, base, parse, name, value, ok)
         for path, base, parse in [("/v1/chat/completions", CHAT, schemas.parse_chat),
                                   ("/v1/completions", COMPLETION, schemas.parse_completion),
                                   ("/v1/messages", MESSAGES, parse_messages),
                                   ("/v1/responses", RESPONSES, parse_responses)]
         for name, schema in properties(path).items()
         for value, ok in bounds(schema)
         if not (value is None and name == "max_tokens" and path == "/v1/messages")]


@pytest.mark.parametrize(("path", "base", "parse", "name", "value", "ok"), CASES,
                         ids=[f"{c[0]}:{c[3]}={c[4]!r}" for c in CASES])
def test_each_documented_bound_is_the_validators(path, base, parse, name, value, ok):
    body = base | {name: value}
    if ok:
        parse(body, 16)
    else:
        with pytest.raises(Refusal) as caught:
            parse(body, 16)
        assert status_of(caught.value) == 400 and caught.value.param == name


@pytest.mark.parametrize(("name", "value", "ok"), [
    ("stop", "x" * openapi.MAX_STOP_LENGTH, True),
    ("stop", "x" * (openapi.MAX_STOP_LENGTH + 1), False),
    ("stop", [""], False),
    ("stop", ["a"] * schemas.MAX_STOP, True),
    ("stop", ["a"] * (schemas.MAX_STOP + 1), False),
    ("messages", [{"role": r, "content": "x", "tool_call_id": "c"} for r in schemas.ROLES],
     True),
    ("messages", [{"role": "tool", "content": "x"}], False),
    ("messages", [{"role": "assistant", "content": None}], False),
    ("messages", [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}], True),
    ("messages", [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}],
     False),
    ("messages", [{"role": "user", "content": [{"type": "text", "text": "x"}]}], True),
    ("messages", [{"role": "user", "content": [{"type": "image_url"}]}], False),
    ("messages", [{"role": "user"}], False),
])
def test_string_and_list_limits(name, value, ok):
    body = CHAT | {name: value}
    if ok:
        schemas.parse_chat(body, 16)
    else:
        with pytest.raises(Refusal) as caught:
            schemas.parse_chat(body, 16)
        assert caught.value.param.startswith(name)


def test_top_logprobs_needs_logprobs():
    """The document's if/then: top_logprobs (not null) requires logprobs: true."""
    schema = openapi.CHAT_REQUEST["allOf"][0]
    assert schema["if"]["required"] == ["top_logprobs"]
    with pytest.raises(Refusal) as caught:
        schemas.parse_chat(CHAT | {"logprobs": False, "top_logprobs": 2}, 16)
    assert caught.value.param == "top_logprobs"
    schemas.parse_chat(CHAT | {"logprobs": False, "top_logprobs": None}, 16)


def test_json_output_and_a_forced_call_exclude_each_other():
    """The document's second if/then: response_format JSON with tool_choice forcing a call."""
    rule = openapi.CHAT_REQUEST["allOf"][1]
    assert rule["if"]["required"] == ["response_format"]
    tools = [{"type": "function", "function": {"name": "f"}}]
    body = CHAT | {"response_format": {"type": "json_object"}, "tools": tools}
    for choice in ("required", {"type": "function", "function": {"name": "f"}}):
        with pytest.raises(Refusal) as caught:
            schemas.parse_chat(body | {"tool_choice": choice}, 16)
        assert caught.value.param == "response_format"
    schemas.parse_chat(body | {"tool_choice": "auto"}, 16)
    schemas.parse_chat(body | {"response_format": {"type": "text"}, "tool_choice": "required"},
                       16)
