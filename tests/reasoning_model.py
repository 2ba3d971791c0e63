"""A tiny random-weight llama that "thinks": the byte-level test vocabulary with a reasoning
family's markers as tokens of their own (Qwen3's added `<think>` / `</think>`, gpt-oss's
Harmony specials) and that family's real chat template from llama.cpp's set. Its weights
are random, so its text is byte noise: tests steer it into the family's shape with the
thinking grammar (engine/reasoning/budget.py), which is what a budget does anyway."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models import llama
from mlx_lm.tokenizer_utils import TokenizerWrapper

from tests.llama_cpp_data import models_dir
from tests.tiny_model import TinyModel, make_tokenizer

QWEN3 = "Qwen-Qwen3-0.6B.jinja"
GPT_OSS = "openai-gpt-oss-120b.jinja"
HARMONY_SPECIALS = ["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>",
                    "<|call|>", "<|constrain|>"]


def thinking_tokenizer(template: str = QWEN3) -> TokenizerWrapper:
    hf = make_tokenizer()._tokenizer
    if template == GPT_OSS:
        hf.add_special_tokens({"additional_special_tokens": HARMONY_SPECIALS})
        ends = ["<|return|>", "<|call|>"]
    else:
        hf.add_tokens(["<think>", "</think>"])  # added, not special: as in Qwen3's vocab
        ends = ["<|im_end|>", "<|endoftext|>"]
    hf.chat_template = (models_dir() / "templates" / template).read_text(encoding="utf-8")
    return TokenizerWrapper(hf, eos_token_ids=[hf.convert_tokens_to_ids(t) for t in ends])


def thinking_tiny(seed: int = 7, template: str = QWEN3, quantized: bool = True,
                  context_length: int = 2048) -> TinyModel:
    """A tiny model on `thinking_tokenizer(template)`, 4-bit (group 32) where `quantized`
    (the native kernels take it: its answers do not depend on the batch)."""
    tokenizer = thinking_tokenizer(template)
    args = llama.ModelArgs(
        model_type="llama", hidden_size=64, num_hidden_layers=2, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
        vocab_size=len(tokenizer._tokenizer), rope_theta=10000.0, tie_word_embeddings=False,
        max_position_embeddings=context_length)
    mx.random.seed(seed)
    model = llama.Model(args)
    model.lm_head.weight = mx.random.normal(model.lm_head.weight.shape) * 0.5
    if quantized:
        nn.quantize(model, group_size=32, bits=4)
    mx.eval(model.parameters())
    return TinyModel(model, tokenizer, frozenset(tokenizer.eos_token_ids), context_length)
