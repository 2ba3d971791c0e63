"""Bodies and JSON schemas that used to get a 500 or an empty reply (issue #46, items 3-5):
a body nested a thousand levels deep, a schema nested deep in `response_format` or a tool's
`parameters`, a `$ref` cycle, an integer beyond 64 bits. Each is a 400 that says why, from a
real server on loopback, chat and completions, streamed or not."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from tests.server.conftest import MODEL

DEEP = "@deep@"  # where `with_deep` puts the deep schema's text


def with_deep(body: dict[str, Any], levels: int) -> bytes:
    """`body` as JSON with an array schema `levels` objects deep ({"type": "array", "items":
    ...}) in place of DEEP (written out as text: json.dumps would hit its own limit)."""
    deep = '{"type": "array", "items": ' * levels + '{"type": "string"}' + "}" * levels
    return json.dumps(body).replace(json.dumps(DEEP), deep).encode()


def as_format(schema: Any) -> dict[str, Any]:
    return {"response_format": {"type": "json_schema",
                                "json_schema": {"name": "x", "schema": schema}}}


def as_tool(schema: Any, parameters: Any = None) -> dict[str, Any]:
    """A tool whose argument `a` has `schema` (or whose parameters are `parameters`)."""
    if parameters is None:
        parameters = {"type": "object", "properties": {"a": schema}}
    return {"tools": [{"type": "function", "function": {"name": "f", "parameters": parameters}}],
            "tool_choice": "required"}


CHAT = {"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
COMPLETION = {"model": MODEL, "max_tokens": 4, "prompt": "hi"}


async def post(url: str, path: str, data: bytes) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.post(
            url + path, data=data, headers={"Content-Type": "application/json"}) as r:
        return r.status, await r.json()


@pytest.mark.parametrize("depth", [1000, 5000, 129])
async def test_a_body_nested_too_deep_is_a_400_that_says_so(serve, depth):
    s = await serve()
    # a deep array in a field the server ignores: the parser meets it all the same
    body = json.dumps(CHAT)[:-1].encode() + b', "extra": ' + b"[" * depth + b"]" * depth + b"}"
    status, error = await post(s.url, "/v1/chat/completions", body)
    assert status == 400, error
    assert error["error"]["code"] == "invalid_json"
    assert "nested too deep" in error["error"]["message"]


@pytest.mark.parametrize("path, base", [("/v1/chat/completions", CHAT),
                                        ("/v1/completions", COMPLETION)])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_schema_nested_a_thousand_deep_is_a_400(serve, path, base, stream):
    s = await serve()
    for levels in (1000, 110):  # the body too deep; the body fine, the schema too deep
        status, error = await post(s.url, path, with_deep(
            base | as_format(DEEP) | {"stream": stream}, levels))
        assert status == 400, error
        assert "nested too deep" in error["error"]["message"], error
    if path.endswith("chat/completions"):
        status, error = await post(s.url, path, with_deep(
            base | as_tool(DEEP) | {"stream": stream}, 110))
        assert status == 400 and error["error"]["code"] == "invalid_schema", error
        assert "nested too deep" in error["error"]["message"]
        assert error["error"]["param"] == "tools[0].function.parameters"


CYCLES = {
    "root": {"$ref": "#"},
    "defs": {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
             "$ref": "#/$defs/a"},
    "allOf": {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}},
              "$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}},
}


@pytest.mark.parametrize("cycle", list(CYCLES))
@pytest.mark.parametrize("stream", [False, True])
async def test_a_ref_cycle_is_refused_not_answered_with_nothing(serve, cycle, stream):
    s = await serve()
    schema = CYCLES[cycle]
    for path, base in (("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)):
        status, error = await post(s.url, path, json.dumps(
            base | as_format(schema) | {"stream": stream}).encode())
        assert status == 400, (path, error)
        assert error["error"]["code"] == "invalid_schema"
        assert error["error"]["param"] == "response_format"
        assert "refers to itself without end" in error["error"]["message"]
    status, error = await post(s.url, "/v1/chat/completions", json.dumps(
        CHAT | as_tool(None, {"type": "object"} | schema) | {"stream": stream}).encode())
    assert status == 400 and error["error"]["code"] == "invalid_schema", error
    assert "refers to itself without end" in error["error"]["message"]


async def test_a_recursive_schema_through_items_is_still_served(serve):
    """A tree recurses through `items` (a smaller value each time): not a cycle."""
    s = await serve()
    tree = {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 3},
        "children": {"type": "array", "maxItems": 1, "items": {"$ref": "#"}}},
        "required": ["name"]}
    reply = await s.client.chat.completions.create(
        model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "hi"}],
        **as_format(tree))
    assert reply.choices[0].message.content  # something, not ""


@pytest.mark.parametrize("minimum", [10**23, -(10**30), 1e23])
async def test_an_integer_beyond_64_bits_is_a_400_naming_the_schema(serve, minimum):
    s = await serve()
    schema = {"type": "integer", "minimum": minimum}
    for path, base in (("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)):
        status, error = await post(s.url, path, json.dumps(base | as_format(schema)).encode())
        assert status == 400, (path, error)
        assert error["error"]["code"] == "invalid_schema"
        assert error["error"]["param"] == "response_format"
    for choice in ("required", "auto"):
        status, error = await post(s.url, "/v1/chat/completions", json.dumps(
            CHAT | as_tool(schema) | {"tool_choice": choice}).encode())
        assert status == 400 and error["error"]["code"] == "invalid_schema", error
        assert error["error"]["param"] == "tools[0].function.parameters"
    if isinstance(minimum, int):
        assert "beyond the 64-bit integers" in error["error"]["message"]
