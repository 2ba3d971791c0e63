"""Issue #45 (d): the real chat templates of ~70 model families (llama.cpp's
``models/templates/*.jinja``, from the llama-cpp-python sdist: tests/llama_cpp_data.py),
each set as a GGUF's ``tokenizer.chat_template``, render on the engine's template path
(engine/chat_prompt.py): a multi-turn chat with a system prompt, every message's text in
the prompt; with tools where the template takes them, the tool in the prompt; with
``enable_thinking`` on and off where the template reads it."""

from __future__ import annotations

from functools import cache

import pytest
from transformers import PreTrainedTokenizerFast

from engine.chat_prompt import chat_tokens, render
from engine.loader.gguf_tokenizer import build_gguf_tokenizer
from tests.gguf_models import vocab
from tests.llama_cpp_data import models_dir

TEMPLATES = sorted(p.name for p in (models_dir() / "templates").glob("*.jinja"))
CHAT = [{"role": "system", "content": "SYSTEMTEXT"}, {"role": "user", "content": "USERONE"},
        {"role": "assistant", "content": "ASSISTANTONE"}, {"role": "user", "content": "USERTWO"}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {
        "type": "string", "description": "The city's name"}},
                   "required": ["city"]}}}]
# transformers' tojson cannot serialize the generator jinja2's map() gives (llama.cpp's
# minja can): this template's tools line fails on transformers' Jinja
TOOLS_FAIL = {"llama-cpp-deepseek-r1.jinja": "map(...) | tojson: a generator in transformers"}


@cache
def tokenizer(name: str) -> PreTrainedTokenizerFast:
    tokens, types = vocab()
    template = (models_dir() / "templates" / name).read_text(encoding="utf-8")
    return build_gguf_tokenizer({
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "smollm",
        "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.merges": ["h e"], "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2, "tokenizer.chat_template": template}, name)


def test_the_sdist_has_the_templates_it_should() -> None:
    assert len(TEMPLATES) >= 70
    sources = [(models_dir() / "templates" / t).read_text(encoding="utf-8") for t in TEMPLATES]
    assert sum("tools" in s for s in sources) >= 40
    assert any("enable_thinking" in s for s in sources)
    assert any("strftime_now" in s for s in sources)


@pytest.mark.parametrize("name", TEMPLATES)
def test_a_multi_turn_chat_with_a_system_prompt(name: str) -> None:
    tok = tokenizer(name)
    text = render(tok, CHAT)
    for m in CHAT:
        assert m["content"] in text, (m["role"], text[-400:])
    assert text.index("USERONE") < text.index("ASSISTANTONE") < text.index("USERTWO")
    ids = chat_tokens(tok, CHAT, len(tok), {2})
    assert tok.decode(ids) == text  # the engine's prompt is the rendering


@pytest.mark.parametrize("name", TEMPLATES)
def test_tools_where_the_template_takes_them(name: str) -> None:
    source = (models_dir() / "templates" / name).read_text(encoding="utf-8")
    if "tools" not in source:
        pytest.skip("the template takes no tools")
    if name in TOOLS_FAIL:
        with pytest.raises(TypeError, match="not JSON serializable"):
            render(tokenizer(name), CHAT, TOOLS)
        return
    text = render(tokenizer(name), CHAT, TOOLS)
    assert "get_weather" in text and "USERTWO" in text


@pytest.mark.parametrize("name", [t for t in TEMPLATES if "enable_thinking" in
                                  (models_dir() / "templates" / t).read_text(encoding="utf-8")])
def test_enable_thinking_on_and_off(name: str) -> None:
    on = render(tokenizer(name), CHAT, enable_thinking=True)
    off = render(tokenizer(name), CHAT, enable_thinking=False)
    assert "USERTWO" in on and "USERTWO" in off


def test_a_template_without_a_system_role_gets_it_in_the_first_user_message() -> None:
    tok = tokenizer("google-gemma-2-2b-it.jinja")
    with pytest.raises(Exception, match="System role not supported"):
        tok.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    text = render(tok, CHAT)
    assert text.index("SYSTEMTEXT") < text.index("USERONE") < text.index("USERTWO")
