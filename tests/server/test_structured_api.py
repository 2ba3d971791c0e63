"""response_format and tools through the official openai client, on the tiny random-weight
model (its replies are noise, so whatever holds here holds by the grammar): refusals name
the field, forced calls and JSON replies validate, per choice with n > 1, and on the
completions endpoint."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from tests.server.conftest import MODEL

SCHEMA = {"type": "object", "properties": {
    "mood": {"enum": ["happy", "sad"]},
    "level": {"type": "integer", "minimum": 1, "maximum": 9},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1, "maxItems": 2}},
    "required": ["mood", "level", "tags"], "additionalProperties": False}
FORMAT = {"type": "json_schema", "json_schema": {"name": "m", "schema": SCHEMA,
                                                 "strict": True}}
TOOLS = [
    {"type": "function", "function": {"name": "pick", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["n"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "say", "parameters": {
        "type": "object", "properties": {"word": {"enum": ["yes", "no"]}},
        "required": ["word"], "additionalProperties": False}}},
]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
MESSAGES = [{"role": "user", "content": "Hi"}]
CHAT = {"model": MODEL, "messages": MESSAGES, "max_tokens": 120}


@pytest.mark.parametrize(("field", "value", "param", "says"), [
    ("response_format", {"type": "xml"}, "response_format", "'response_format.type' must"),
    ("response_format", {"type": "json_schema"}, "response_format",
     "'response_format.json_schema' must"),
    ("response_format", {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "banana"}}}, "response_format",
     "'response_format.json_schema.schema' cannot be used"),
    ("tools", [{"type": "code_interpreter"}], "tools[0].type", "'tools[0].type' must be"),
    ("tools", [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": 3}}}}}],
     "tools[0].function.parameters", "'tools[0].function.parameters' is not a usable"),
    ("tool_choice", "required", "tool_choice", "'tool_choice': 'required' needs 'tools'"),
    ("tool_choice", "sometimes", "tool_choice", "'tool_choice' must be one of"),
    ("messages", [{"role": "tool", "content": "3"}], "messages[0].tool_call_id",
     "'messages[0].tool_call_id' must"),
    ("messages", [{"role": "assistant", "content": None, "tool_calls": [{
        "id": "c", "type": "function", "function": {"name": "f", "arguments": "nope"}}]}],
     "messages[0].tool_calls[0].function.arguments", "'messages[0].tool_calls[0]"),
])
async def test_unsupported_values_get_400_naming_the_field(serve, field, value, param, says):
    s = await serve()
    with pytest.raises(openai.BadRequestError) as caught:
        await s.client.chat.completions.create(**(CHAT | {field: value}))
    assert caught.value.body["param"] == param
    assert caught.value.body["message"].startswith(says)
    assert s.engine.finished_requests() == []


async def test_a_named_function_must_be_offered_and_completions_take_no_tools(serve):
    s = await serve()
    with pytest.raises(openai.BadRequestError) as caught:
        await s.client.chat.completions.create(
            **CHAT, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "x"}})
    assert caught.value.body["param"] == "tool_choice"
    with pytest.raises(openai.BadRequestError) as caught:
        await s.client.completions.create(model=MODEL, prompt="Hi",
                                          extra_body={"tools": TOOLS})
    assert caught.value.body["param"] == "tools"


async def test_json_schema_per_choice_and_on_completions(serve):
    """n = 3: every choice is constrained (and they differ: each samples on its own)."""
    s = await serve()
    r = await s.client.chat.completions.create(**CHAT, n=3, seed=5, response_format=FORMAT)
    replies = [json.loads(c.message.content) for c in r.choices]
    for reply, choice in zip(replies, r.choices, strict=True):
        jsonschema.validate(reply, SCHEMA)
        assert choice.finish_reason == "stop"
    assert len({json.dumps(x) for x in replies}) > 1
    c = await s.client.completions.create(model=MODEL, prompt="JSON:", max_tokens=120,
                                          seed=1, extra_body={"response_format": FORMAT})
    jsonschema.validate(json.loads(c.choices[0].text), SCHEMA)
    free = await s.client.chat.completions.create(**CHAT, seed=5)
    with pytest.raises(ValueError):  # without response_format the noise is no JSON
        json.loads(free.choices[0].message.content)


async def test_forced_calls_validate_per_choice_streamed_as_whole(serve):
    s = await serve(engine={"context_length": 2048})  # byte tokens: the tools take ~800
    chat = CHAT | {"max_tokens": 300}  # room for 4 calls (parallel_tool_calls)
    r = await s.client.chat.completions.create(**chat, n=2, seed=7, tools=TOOLS,
                                               tool_choice="required")
    for choice in r.choices:
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content is None and choice.message.tool_calls
        for call in choice.message.tool_calls:
            jsonschema.validate(json.loads(call.function.arguments),
                                PARAMS[call.function.name])
    named = {"type": "function", "function": {"name": "say"}}
    whole = await s.client.chat.completions.create(**chat, seed=3, tools=TOOLS,
                                                   tool_choice=named)
    [call] = whole.choices[0].message.tool_calls
    assert call.function.name == "say"
    assert json.loads(call.function.arguments)["word"] in ("yes", "no")
    streamed = await s.client.chat.completions.create(**chat, seed=3, tools=TOOLS,
                                                      tool_choice=named, stream=True)
    calls: dict[int, dict[str, str]] = {}
    reasons = []
    async for chunk in streamed:
        delta = chunk.choices[0].delta
        assert not delta.content
        for piece in delta.tool_calls or ():
            got = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
            if piece.id:
                assert not got["id"]  # id and name come first, once
                got["id"], got["name"] = piece.id, piece.function.name
            got["arguments"] += piece.function.arguments or ""
        reasons.append(chunk.choices[0].finish_reason)
    assert reasons[-1] == "tool_calls"
    assert [(c["name"], c["arguments"]) for c in calls.values()] == [
        (call.function.name, call.function.arguments)]


# A Qwen-style template that renders tools (mlx-lm's inference names its parser json_tools)
TOOL_TEMPLATE = """{%- if tools %}<|im_start|>system
# Tools
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools><|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == "assistant" and m.tool_calls %}<|im_start|>assistant
{%- for tool_call in m.tool_calls %}
{%- set tool_call = tool_call.function %}
<tool_call>
{"name": "{{ tool_call.name }}", "arguments": {{ tool_call.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif m.role == "tool" %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


async def test_a_template_with_tool_support_renders_them_itself(tiny):
    """Tools, earlier calls (arguments as objects) and results go through the model's own
    template (not the fallback section), and its family's parser reads the calls."""
    from engine import Engine, EngineConfig
    from tests.server.conftest import serving
    from tests.tiny_model import make_tokenizer

    tok = make_tokenizer()
    tok._tokenizer.chat_template = TOOL_TEMPLATE
    engine = Engine(tiny.model, tok, eos_token_ids=[], context_length=2048,
                    config=EngineConfig())
    messages = [
        {"role": "user", "content": "Pick."},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "c1", "type": "function",
            "function": {"name": "pick", "arguments": '{"n": 4}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "picked 4"}]
    async with serving(engine) as s:
        target = s.server._target()
        assert target.tool_template() == (True, "json_tools")
        r = await s.client.chat.completions.create(
            model=MODEL, messages=messages, tools=TOOLS, tool_choice="required",
            max_tokens=300, seed=2)
    expected = tok.apply_chat_template(
        [messages[0], messages[1] | {"content": "", "tool_calls": [{
            "id": "c1", "type": "function", "function": {"name": "pick",
                                                          "arguments": {"n": 4}}}]},
         messages[2]], tools=TOOLS, add_generation_prompt=True, tokenize=False)
    assert '"arguments": {"n": 4}' in expected and json.dumps(TOOLS[1]) in expected
    assert "<tool_response>\npicked 4" in expected
    assert r.usage.prompt_tokens == len(tok.encode(expected, add_special_tokens=False))
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    for call in choice.message.tool_calls:
        jsonschema.validate(json.loads(call.function.arguments), PARAMS[call.function.name])


async def test_auto_keeps_text_that_is_no_call_as_content(serve):
    s = await serve(engine={"context_length": 2048})
    r = await s.client.chat.completions.create(**CHAT, seed=1, tools=TOOLS)
    free = await s.client.chat.completions.create(**CHAT, seed=1)
    choice = r.choices[0]
    assert choice.message.tool_calls is None and choice.finish_reason == "length"
    assert choice.message.content and choice.message.content != free.choices[0].message.content
