"""app/tools without a model: tools checked, calls parsed whole and streamed (split at every
point: the same calls and content), the fallback rendering, and the forcing grammar matched
by llguidance itself."""

from __future__ import annotations

import json

import pytest

from app.tools import (
    HERMES,
    CallStream,
    ToolSpecError,
    call_format,
    call_grammar,
    fallback_messages,
    parse_reply,
    parse_tools,
    template_messages,
)

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "add", "parameters": {"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}},
]
NAMES = ["get_weather", "add"]
REPLY = ('Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", '
         '"unit": "celsius"}}\n</tool_call>\n<tool_call>\n{"name": "add", "arguments": '
         '{"a": 2, "b": 3}}\n</tool_call>\n')


def test_tools_are_checked_naming_the_field():
    assert [t.name for t in parse_tools(TOOLS)] == NAMES
    cases = [
        ([{"type": "retrieval"}], "tools[0].type"),
        ([{"type": "function", "function": {"name": "a b"}}], "tools[0].function.name"),
        ([TOOLS[0], TOOLS[0]], "tools[1].function.name"),
        ([{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}],
         "tools[0].function.parameters"),
        ([{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"x": {"type": "banana"}}}}}],
         "tools[0].function.parameters"),
        ({"name": "f"}, "tools"),
    ]
    for value, field in cases:
        with pytest.raises(ToolSpecError) as caught:
            parse_tools(value)
        assert caught.value.field == field


def test_a_whole_reply_gives_its_text_and_calls():
    parsed = parse_reply(REPLY, HERMES, NAMES)
    assert parsed.content == "Let me look."
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == [
        ("get_weather", {"city": "Oslo", "unit": "celsius"}), ("add", {"a": 2, "b": 3})]
    assert len({c.id for c in parsed.calls}) == 2
    only_calls = parse_reply(REPLY[REPLY.index("<tool_call>"):], HERMES, NAMES)
    assert only_calls.content is None and len(only_calls.calls) == 2


@pytest.mark.parametrize("text", [
    "Just text, no calls.",
    "cut short <tool_call>\n{\"name\": \"add\", \"argu",  # the reply ended inside a call
    "<tool_call>not json</tool_call> after",
    '<tool_call>{"name": "unknown", "arguments": {}}</tool_call>',  # not an offered tool
    '<tool_call>{"name": "add", "arguments": [1]}</tool_call>',
    "a lone < and <tool",
])
def test_what_does_not_parse_stays_content(text):
    parsed = parse_reply(text, HERMES, NAMES)
    assert parsed.calls == [] and parsed.content == text


def test_streamed_in_any_split_gives_the_same_calls_and_content():
    whole = parse_reply(REPLY, HERMES, NAMES)
    for cut in range(1, len(REPLY)):
        for pieces in ([REPLY[:cut], REPLY[cut:]], list(REPLY)):
            stream = CallStream(HERMES, NAMES)
            deltas = [d for p in pieces for d in stream.feed(p)] + stream.finish()
            assert "".join(d.content for d in deltas) == whole.content
            calls = [d.call for d in deltas if d.call is not None]
            assert [(c.name, c.arguments) for c in calls] == [
                (c.name, c.arguments) for c in whole.calls]
            assert [d.index for d in deltas if d.call is not None] == [0, 1]


def test_content_before_a_call_is_sent_before_the_call_closes():
    stream = CallStream(HERMES, NAMES)
    assert [d.content for d in stream.feed("Hello <tool")] == ["Hello"]
    assert stream.feed('_call>{"name": "add", "arguments": {"a": 1, "b": 2}}') == []
    [delta] = stream.feed("</tool_call>")
    assert delta.call.name == "add" and delta.index == 0


def test_an_mlx_lm_parser_is_used_for_its_family():
    fmt = call_format("json_tools")  # Qwen / Hermes templates
    assert (fmt.start, fmt.end) == ("<tool_call>", "</tool_call>")
    assert parse_reply(REPLY, fmt, NAMES).calls[1].name == "add"
    mistral = call_format("mistral")
    parsed = parse_reply('[TOOL_CALLS]add[ARGS]{"a": 1, "b": 2}', mistral, NAMES)
    assert parsed.content is None and json.loads(parsed.calls[0].arguments) == {"a": 1, "b": 2}
    assert call_format(None) is HERMES


def test_the_fallback_lists_the_tools_and_writes_calls_and_results():
    tools = parse_tools(TOOLS)
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Oslo","unit":"celsius"}'}},
            {"id": "c2", "type": "function",
             "function": {"name": "add", "arguments": '{"a":1,"b":2}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "4 degrees"},
        {"role": "tool", "tool_call_id": "c2", "content": "3"},
    ]
    out = fallback_messages(messages, tools)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[0]["content"].startswith("Be brief.\n\n# Tools")
    for tool in TOOLS:
        assert json.dumps(tool) in out[0]["content"]
    assert parse_reply(out[2]["content"], HERMES, NAMES).calls[0].arguments == json.dumps(
        {"city": "Oslo", "unit": "celsius"})
    assert out[3]["content"] == ("<tool_response>\n4 degrees\n</tool_response>\n"
                                 "<tool_response>\n3\n</tool_response>")
    assert all(set(m) == {"role", "content"} for m in out)
    assert fallback_messages(messages, [])[0] == {"role": "system", "content": "Be brief."}
    templated = template_messages(messages)
    assert templated[2]["tool_calls"][1]["function"]["arguments"] == {"a": 1, "b": 2}
    assert templated[3]["tool_call_id"] == "c1"


def matches(grammar: str, text: str) -> bool:
    """Whether llguidance's matcher takes `text` whole under `grammar` (byte tokens)."""
    import llguidance
    from llguidance import LLMatcher

    tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokenizer()))
    matcher = LLMatcher(tok, grammar)
    ok = matcher.consume_tokens(list(text.encode()))
    return ok and not matcher.is_error() and matcher.is_accepting()


class _ByteTokenizer:
    eos_token_id = 256
    bos_token_id = None
    tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
    special_token_ids = [256]

    def __call__(self, text, **_):
        return list(text.encode())


def test_the_forcing_grammar_takes_valid_calls_only():
    tools = parse_tools(TOOLS)
    grammar = call_grammar(tools)
    one = '<tool_call>\n{"name":"add","arguments":{"a":1,"b":2}}\n</tool_call>'
    two = one + ('\n<tool_call>\n{"name":"get_weather","arguments":{"city":"Oslo",'
                 '"unit":"celsius"}}\n</tool_call>')
    assert matches(grammar, one) and matches(grammar, two)
    assert not matches(grammar, 'Sure. ' + one)  # no text around forced calls
    assert not matches(grammar, one.replace('"b":2', '"b":"2"'))  # the schema holds
    assert not matches(grammar, one.replace('"add"', '"sub"'))
    assert not matches(grammar, one.replace(',"b":2', ""))  # required
    assert not matches(call_grammar(tools, parallel=False), two)
    assert not matches(call_grammar(tools[:1]), one)  # a named function: only that one
