"""Issue #49 (A, B): the reasoning style of real chat templates (llama.cpp's set, from the
llama-cpp-python sdist: tests/llama_cpp_data.py) and the controls reaching them: thinking
on and off, reasoning_effort, earlier turns' reasoning kept or dropped as each template
writes it, tools and reasoning together; replies in each family's shape split."""

from __future__ import annotations

import pytest

from engine.chat_prompt import chat_tokens, render
from engine.reasoning import Controls, split_whole, starts_inside, style_of, template_kwargs
from engine.reasoning.controls import NO_THINK_SYSTEM, with_switch
from engine.reasoning.style import closed_in_prompt
from tests.engine.test_chat_templates import TOOLS, tokenizer
from tests.llama_cpp_data import models_dir

QWEN3 = "Qwen-Qwen3-0.6B.jinja"
QWEN35 = "Qwen3.5-4B.jinja"
R1 = "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
R1_LLAMA = "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"
GPT_OSS = "openai-gpt-oss-120b.jinja"
SMOL = "HuggingFaceTB-SmolLM3-3B.jinja"
MINISTRAL = "mistralai-Ministral-3-14B-Reasoning-2512.jinja"
GLM = "GLM-4.6.jinja"
CHAT = [{"role": "system", "content": "SYSTEMTEXT"}, {"role": "user", "content": "USERONE"},
        {"role": "assistant", "content": "ASSISTANTONE", "reasoning_content": "THOUGHTONE"},
        {"role": "user", "content": "USERTWO"}]


def source(name: str) -> str:
    return (models_dir() / "templates" / name).read_text(encoding="utf-8")


def prompt(name: str, controls: Controls | None = None, messages=CHAT, tools=None) -> str:
    controls = controls or Controls()
    style = style_of(source(name))
    msgs = [m | ({"thinking": m["reasoning_content"]} if "reasoning_content" in m else {})
            for m in with_switch(style, controls, messages)]
    return render(tokenizer(name), msgs, tools, **template_kwargs(style, controls))


@pytest.mark.parametrize(("name", "kind", "start", "end"), [
    (QWEN3, "tags", "<think>", "</think>"), (QWEN35, "tags", "<think>", "</think>"),
    (R1, "tags", "<think>", "</think>"), (R1_LLAMA, "tags", "<think>", "</think>"),
    (SMOL, "tags", "<think>", "</think>"), (GLM, "tags", "<think>", "</think>"),
    (MINISTRAL, "tags", "[THINK]", "[/THINK]"),
    (GPT_OSS, "harmony", "<|channel|>analysis<|message|>", "<|end|>"),
    ("ByteDance-Seed-OSS.jinja", "tags", "<seed:think>", "</seed:think>"),
])
def test_the_style_is_read_from_the_template(name, kind, start, end) -> None:
    style = style_of(source(name))
    assert style is not None and (style.kind, style.start, style.end) == (kind, start, end)


def test_a_model_that_does_not_think_has_no_style() -> None:
    assert style_of(source("meta-llama-Llama-3.1-8B-Instruct.jinja")) is None
    assert style_of(source("mistralai-Mistral-Nemo-Instruct-2407.jinja")) is None


@pytest.mark.parametrize("name", [QWEN3, QWEN35, GLM])
def test_enable_thinking_reaches_qwen_and_glm(name) -> None:
    style = style_of(source(name))
    on, off = prompt(name, Controls(thinking=True)), prompt(name, Controls(thinking=False))
    assert template_kwargs(style, Controls(thinking=False))["enable_thinking"] is False
    assert not closed_in_prompt(style, on) and closed_in_prompt(style, off)
    # effort "none" is thinking off, any other effort on
    assert prompt(name, Controls(effort="none")) == off
    assert prompt(name, Controls(effort="high")) == on


@pytest.mark.parametrize("name", [R1, R1_LLAMA])
def test_deepseek_r1_opens_the_thinking_in_the_prompt(name) -> None:
    style = style_of(source(name))
    on = prompt(name, Controls(thinking=True))
    assert on.endswith("<think>\n") and starts_inside(style, on)
    if "enable_thinking" in source(name):  # llama.cpp's copy of the 32B's closes it
        off = prompt(name, Controls(thinking=False))
        assert not starts_inside(style, off) and closed_in_prompt(style, off)


@pytest.mark.parametrize(("effort", "level"), [("none", "low"), ("low", "low"),
                                               ("medium", "medium"), ("high", "high")])
def test_reasoning_effort_reaches_gpt_oss(effort, level) -> None:
    text = prompt(GPT_OSS, Controls(effort=effort))
    assert f"Reasoning: {level}\n" in text
    assert text.endswith("<|start|>assistant")


def test_smollm3_thinking_is_switched_in_its_system_prompt() -> None:
    on, off = prompt(SMOL, Controls(thinking=True)), prompt(SMOL, Controls(thinking=False))
    assert "/no_think" in off and "/think" in on and "/no_think" not in on
    assert off.endswith("<think>\n\n</think>\n")
    assert closed_in_prompt(style_of(source(SMOL)), off)


def test_ministral_reasoning_thinks_under_its_own_system_prompt_only() -> None:
    bare = [m for m in CHAT if m["role"] != "system"]
    on = prompt(MINISTRAL, Controls(thinking=True), bare)
    off = prompt(MINISTRAL, Controls(thinking=False), bare)
    assert "[THINK]Your thoughts" in on
    assert "[THINK]Your thoughts" not in off and NO_THINK_SYSTEM in off


@pytest.mark.parametrize("name", [QWEN3, QWEN35, GPT_OSS, R1])
def test_earlier_turns_reasoning_is_dropped_as_the_template_writes(name) -> None:
    text = prompt(name)
    assert "ASSISTANTONE" in text and "USERTWO" in text
    assert "THOUGHTONE" not in text  # a finished turn's thinking is not replayed


def test_qwen3_keeps_reasoning_between_the_tool_calls_of_one_turn() -> None:
    turn = CHAT[:2] + [
        {"role": "user", "content": "USERTWO"},
        {"role": "assistant", "content": "", "reasoning_content": "THOUGHTCALL",
         "tool_calls": [{"type": "function", "function": {
             "name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "SUNNY"}]
    text = render(tokenizer(QWEN3), turn, TOOLS, enable_thinking=True)
    assert "<think>\nTHOUGHTCALL\n</think>" in text and "get_weather" in text
    assert "SUNNY" in text


@pytest.mark.parametrize(("name", "kept"), [
    (QWEN3, "<think>\nTHOUGHTCALL\n</think>"), (QWEN35, "THOUGHTCALL"),
    (GLM, "<think>THOUGHTCALL</think>"),
    (GPT_OSS, "<|channel|>analysis<|message|>THOUGHTCALL<|end|>")])
def test_the_thinking_between_one_turns_calls_is_kept_and_dropped_after(name, kept) -> None:
    """A turn still going on (calls and their results after the last user message) keeps
    its calls' thinking; once the turn is answered and the user speaks again, it is gone
    (the message as the engine hands it: reasoning_content, and gpt-oss's `thinking`)."""
    call = {"role": "assistant", "content": "", "reasoning_content": "THOUGHTCALL",
            "thinking": "THOUGHTCALL", "tool_calls": [{"type": "function", "function": {
                "name": "get_weather", "arguments": {"city": "Paris"}}}]}
    turn = CHAT[:2] + [{"role": "user", "content": "USERTWO"}, call,
                       {"role": "tool", "content": "SUNNY"}]
    text = render(tokenizer(name), turn, TOOLS, **template_kwargs(style_of(source(name)),
                                                                   Controls(thinking=True)))
    assert kept in text and "SUNNY" in text
    after = turn + [{"role": "assistant", "content": "It is sunny."},
                    {"role": "user", "content": "USERTHREE"}]
    text = render(tokenizer(name), after, TOOLS, **template_kwargs(style_of(source(name)),
                                                                    Controls(thinking=True)))
    assert "THOUGHTCALL" not in text and "USERTHREE" in text


@pytest.mark.parametrize("name", [QWEN3, GPT_OSS, GLM])
def test_tools_and_reasoning_together(name) -> None:
    text = prompt(name, Controls(effort="high"), tools=TOOLS)
    assert "get_weather" in text and "USERTWO" in text


def test_the_engine_prompt_carries_the_controls() -> None:
    tok = tokenizer(QWEN3)
    kwargs = template_kwargs(style_of(source(QWEN3)), Controls(thinking=False))
    ids = chat_tokens(tok, CHAT, len(tok), {2}, kwargs)
    assert tok.decode(ids) == prompt(QWEN3, Controls(thinking=False))
    assert tok.decode(ids).endswith("<think>\n\n</think>\n\n")


@pytest.mark.parametrize(("name", "reply", "reasoning", "answer"), [
    (QWEN3, "<think>\nstep one\nstep two\n</think>\n\nParis.", "step one\nstep two", "Paris."),
    (R1, "step one\n</think>\n\nParis.", "step one", "Paris."),
    (MINISTRAL, "[THINK]hmm[/THINK]Paris.", "hmm", "Paris."),
    (GPT_OSS, "<|channel|>analysis<|message|>step one<|end|><|start|>assistant"
              "<|channel|>final<|message|>Paris.", "step one", "Paris."),
    (QWEN3, " Paris, no thinking.", "", " Paris, no thinking."),
])
def test_replies_in_each_family_shape_split(name, reply, reasoning, answer) -> None:
    style = style_of(source(name))
    inside = starts_inside(style, prompt(name, Controls(thinking=True)))
    assert split_whole(reply, style, inside)[:2] == (reasoning, answer)
