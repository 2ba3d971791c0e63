"""A tab's output format: schema files checked with clear messages, the saved params keep
the schema (not the grammar), the local engine gets a checked grammar, a remote server gets
`response_format` in the request body (a real aiohttp server on loopback)."""

from __future__ import annotations

import json

import pytest

from app.remote import Connection, RemoteClient
from app.request import Refusal
from app.request.engine_input import choice_params, remote_call
from app.request.output_format import OutputFormatError, grammar_of, load_schema_file
from app.request.tab import tab_request
from app.settings import Settings, normalize_params
from engine.public import SamplingParams
from tests.remote.broken_server import API_KEY, BrokenServer

PERSON = {"type": "object", "properties": {"name": {"type": "string"},
                                           "age": {"type": "integer"}},
          "required": ["name", "age"]}
HI = [{"role": "user", "content": "hi"}]


def engine_params(params):
    """A tab's params as the local engine takes them (its one choice's settings)."""
    [out] = choice_params(tab_request(HI, params))
    return out


def remote_extras(params):
    """(sampling params, extra body fields) a remote server gets for a tab's params."""
    _, sampling, extra = remote_call(tab_request(HI, params, local=False))
    return sampling, extra


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_schema_file_becomes_a_readable_response_format(tmp_path):
    fmt = load_schema_file(write(tmp_path, "person.json", json.dumps(PERSON)))
    assert fmt == {"type": "json_schema",
                   "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    grammar = grammar_of(fmt)
    assert grammar and SamplingParams(grammar=grammar).grammar == grammar


@pytest.mark.parametrize(("name", "text", "message"), [
    (None, "", "no such file"),
    ("prose.json", "not json at all", "prose.json is not JSON: Expecting value"),
    ("list.json", "[1, 2]", "list.json: a JSON schema must be a JSON object, not list"),
    ("bad.json", '{"type": "objekt"}', "bad.json: not a valid JSON schema: 'objekt' is not"),
    ("badprop.json", '{"type": "object", "properties": {"a": {"minimum": "x"}}}',
     "not a valid JSON schema: 'x' is not of type 'number' (at properties/a/minimum)"),
])
def test_a_bad_schema_file_is_refused_with_a_message(tmp_path, name, text, message):
    path = write(tmp_path, name, text) if name else tmp_path / "missing.json"
    with pytest.raises(OutputFormatError) as err:
        load_schema_file(path)
    assert message in str(err.value)


def test_engine_params_turn_the_format_into_a_grammar():
    text = normalize_params({"temperature": 0.0})
    assert "response_format" not in text  # text: the saved params stay as before
    assert "grammar" not in engine_params(text)
    SamplingParams.from_dict(engine_params(text))
    as_json = engine_params(text | {"response_format": {"type": "json_object"}})
    assert "response_format" not in as_json
    assert SamplingParams.from_dict(as_json).grammar == grammar_of({"type": "json_object"})


def test_a_hand_edited_format_is_refused_not_ignored():
    with pytest.raises(Refusal, match="unknown output format type 'yaml'"):
        engine_params({"response_format": {"type": "yaml"}})
    with pytest.raises(Refusal, match="not a valid JSON schema"):
        engine_params({"response_format": {"type": "json_schema",
                                           "json_schema": {"schema": {"type": 5}}}})
    with pytest.raises(Refusal):
        remote_extras({"response_format": {"type": "json_schema", "json_schema": {}}})


def test_the_format_is_saved_with_presets_and_read_back(tmp_path):
    s = Settings(tmp_path / "settings.json")
    fmt = {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON,
                                                  "strict": True}}
    s.save_preset("People", normalize_params({"response_format": fmt}))
    raw = json.loads((tmp_path / "settings.json").read_text())
    assert "grammar" not in json.dumps(raw)  # the schema is kept, never the grammar text
    assert Settings.load(tmp_path / "settings.json").preset("People")["response_format"] == fmt
    assert "response_format" not in normalize_params({"response_format": "json"})


async def test_a_remote_server_gets_response_format():
    server = BrokenServer()
    await server.start()
    client = RemoteClient(Connection(server.url, model="ok", api_key=API_KEY, name="srv"))
    try:
        fmt = {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON,
                                                      "strict": True}}
        sampling, extra = remote_extras(normalize_params({"response_format": fmt}))
        stream = client.submit([{"role": "user", "content": "hi"}], params=sampling,
                               extra_body=extra)
        [e async for e in stream]
        assert server.requests[0]["response_format"] == fmt
        text, none = remote_extras(normalize_params({}))
        assert none == {} and "response_format" not in text
    finally:
        await client.close()
        await server.stop()
