"""An Anthropic Messages body read into the ChatRequest the OpenAI routes make
(app/server/anthropic/request.py): the conversation's blocks in order, the tools, the
controls, and refusals named in the Anthropic body's terms."""

from __future__ import annotations

import json

import pytest

from app.request import Refusal
from app.server.anthropic.request import parse_count, parse_messages
from app.server.schemas import parse_chat

TOOL = {"name": "get_time", "description": "The time",
        "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}}}


def body(**fields):
    return {"model": "m", "max_tokens": 9} | fields


def test_blocks_become_the_openai_conversation_in_order():
    parsed = parse_messages(body(
        system=[{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
        tools=[TOOL],
        messages=[
            {"role": "user", "content": "Time?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Call it.", "signature": ""},
                {"type": "redacted_thinking", "data": "x"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "t1", "name": "get_time", "input": {"tz": "CET"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [
                    {"type": "text", "text": "14:05"}]},
                {"type": "text", "text": "And in words?"}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t2", "content": "boom",
                 "is_error": True}]}]), 100)
    assert parsed.messages == [
        {"role": "system", "content": "Be brief.\nBe kind."},
        {"role": "user", "content": "Time?"},
        {"role": "assistant", "content": "Let me look.", "reasoning_content": "Call it.",
         "tool_calls": [{"id": "t1", "type": "function", "function": {
             "name": "get_time", "arguments": json.dumps({"tz": "CET"})}}]},
        {"role": "tool", "content": "14:05", "tool_call_id": "t1"},
        {"role": "user", "content": "And in words?"},
        {"role": "tool", "content": "Error: boom", "tool_call_id": "t2"}]
    assert parsed.tool_road and [t.name for t in parsed.tools] == ["get_time"]
    assert parsed.params.max_tokens == 9 and parsed.tool_choice == "auto"


def test_the_same_request_as_the_openai_body_it_means():
    """Sampling, stops, tools and the forcing grammar are parse_chat's own."""
    anthropic = parse_messages(body(
        messages=[{"role": "user", "content": "Hi"}], temperature=0.5, top_p=0.9, top_k=7,
        stop_sequences=["END"], tools=[TOOL],
        tool_choice={"type": "any", "disable_parallel_tool_use": True}), 100)
    openai = parse_chat({"model": "m", "max_tokens": 9, "temperature": 0.5, "top_p": 0.9,
                         "top_k": 7, "stop": ["END"], "parallel_tool_calls": False,
                         "tool_choice": "required",
                         "messages": [{"role": "user", "content": "Hi"}],
                         "tools": [{"type": "function", "function": {
                             "name": "get_time", "description": "The time",
                             "parameters": TOOL["input_schema"]}}]}, 100)
    assert anthropic == openai


@pytest.mark.parametrize(("thinking", "effort", "on", "budget", "want"), [
    (None, None, None, None, None),
    ({"type": "enabled", "budget_tokens": 2048}, None, True, 2048, None),
    ({"type": "adaptive"}, "max", True, None, "high"),
    ({"type": "disabled"}, "low", False, None, "low"),
])
def test_thinking_and_effort_are_the_reasoning_controls(thinking, effort, on, budget, want):
    fields = {"thinking": thinking}
    if effort is not None:
        fields["output_config"] = {"effort": effort}
    parsed = parse_messages(body(messages=[{"role": "user", "content": "Hi"}], **fields), 9)
    assert (parsed.reasoning.thinking, parsed.reasoning.budget, parsed.reasoning.effort) == \
        (on, budget, want)


@pytest.mark.parametrize(("fields", "param"), [
    ({"stop_sequences": ["x" * 300]}, "stop_sequences[0]"),
    ({"stop_sequences": [""]}, "stop_sequences"),
    ({"tools": [{"name": "a b", "input_schema": {"type": "object"}}]}, "tools[0].name"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": [
            {"type": "image", "source": {}}]}]}]}, "messages[0].content[0].content[0]"),
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
     "messages[0].content[0]"),
    ({"messages": [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "f", "input": []}]},
        {"role": "user", "content": "ok"}]}, "messages[0].content[0].input"),
    ({"top_p": 0}, "top_p"),
])
def test_refusals_name_the_anthropic_field(fields, param):
    with pytest.raises(Refusal) as caught:
        parse_messages(body(messages=[{"role": "user", "content": "Hi"}]) | fields, 9)
    assert caught.value.param == param
    assert f"'{param}'" in caught.value.message


@pytest.mark.parametrize("effort", ["huge", {}, ["low"], 3])
def test_an_effort_that_is_not_a_level_is_refused(effort):
    # an object or a list was a TypeError (unhashable) and a 500 (the fuzz found it)
    with pytest.raises(Refusal) as caught:
        parse_messages(body(messages=[{"role": "user", "content": "Hi"}],
                            output_config={"effort": effort}), 9)
    assert caught.value.param == "output_config"
    assert "'output_config.effort' must be one of" in caught.value.message


def test_count_tokens_reads_the_prompt_only():
    parsed = parse_count({"model": "m", "messages": [{"role": "user", "content": "Hi"}],
                          "max_tokens": "ignored", "temperature": "ignored"})
    assert parsed.messages == [{"role": "user", "content": "Hi"}]
