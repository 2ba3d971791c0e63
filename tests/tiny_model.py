"""A tiny random-weight llama and a byte-level tokenizer, built in-process for fast tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.models import llama
from mlx_lm.tokenizer_utils import TokenizerWrapper
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@dataclass
class TinyModel:
    model: Any
    tokenizer: TokenizerWrapper
    eos_token_ids: frozenset[int]
    context_length: int


def make_tokenizer() -> TokenizerWrapper:
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
        pad_token="<|endoftext|>", chat_template=CHATML,
    )
    end_ids = [hf.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    return TokenizerWrapper(hf, eos_token_ids=end_ids)


def make_tiny_model(seed: int = 0, layers: int = 2, hidden: int = 64,
                    context_length: int = 512) -> TinyModel:
    tokenizer = make_tokenizer()
    args = llama.ModelArgs(
        model_type="llama", hidden_size=hidden, num_hidden_layers=layers,
        intermediate_size=hidden * 2, num_attention_heads=4, num_key_value_heads=2,
        rms_norm_eps=1e-5, vocab_size=len(tokenizer.vocab), rope_theta=10000.0,
        tie_word_embeddings=False, max_position_embeddings=context_length,
    )
    mx.random.seed(seed)
    model = llama.Model(args)
    # An untied, larger-scale head, so greedy text varies instead of repeating one token.
    model.lm_head.weight = mx.random.normal(model.lm_head.weight.shape) * 0.5
    mx.eval(model.parameters())
    return TinyModel(model, tokenizer, frozenset(tokenizer.eos_token_ids), context_length)


def save_tiny_dir(tiny: TinyModel, dest: Any, context_length: int = 512) -> Any:
    """`tiny` as an mlx-lm model directory (config.json, model.safetensors, tokenizer)."""
    import json
    from pathlib import Path

    from mlx.utils import tree_flatten

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    a = tiny.model.args
    config = {"model_type": "llama", "hidden_size": a.hidden_size,
              "num_hidden_layers": a.num_hidden_layers, "intermediate_size": a.intermediate_size,
              "num_attention_heads": a.num_attention_heads,
              "num_key_value_heads": a.num_key_value_heads, "rms_norm_eps": a.rms_norm_eps,
              "vocab_size": a.vocab_size, "rope_theta": a.rope_theta,
              "tie_word_embeddings": False, "max_position_embeddings": context_length}
    (dest / "config.json").write_text(json.dumps(config))
    mx.save_safetensors(str(dest / "model.safetensors"),
                        dict(tree_flatten(tiny.model.parameters())))
    tiny.tokenizer._tokenizer.save_pretrained(str(dest))
    return dest


def place_in_hub_cache(src: Any, cache: Any, repo_id: str,
                       commit: str = "0123456789abcdef0123456789abcdef01234567") -> Any:
    """Copy model directory `src` into hub cache `cache` as huggingface_hub lays a download
    out (blobs, a snapshot of links, refs/main); returns the snapshot folder."""
    import hashlib
    import os
    from pathlib import Path

    storage = Path(cache) / f"models--{repo_id.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    (storage / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for file in sorted(Path(src).iterdir()):
        data = file.read_bytes()
        blob = storage / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        os.symlink(os.path.relpath(blob, snapshot), snapshot / file.name)
    (storage / "refs").mkdir(exist_ok=True)
    (storage / "refs" / "main").write_text(commit)
    return snapshot


def save_mlx_dir(tiny: TinyModel, d: Any, quantization: dict[str, int] | None = None,
                 tokenizer: TokenizerWrapper | None = None) -> Any:
    """`tiny` saved as an mlx-lm model directory `d` (a pathlib.Path; made if missing), as
    engine.loader reads it; `quantization`: the group size and bits it was quantized with."""
    import json

    from mlx.utils import tree_flatten

    d.mkdir(parents=True, exist_ok=True)
    a = tiny.model.args
    config = {"model_type": "llama", "hidden_size": a.hidden_size,
              "num_hidden_layers": a.num_hidden_layers, "intermediate_size": a.intermediate_size,
              "num_attention_heads": a.num_attention_heads,
              "num_key_value_heads": a.num_key_value_heads, "rms_norm_eps": a.rms_norm_eps,
              "vocab_size": a.vocab_size, "rope_theta": a.rope_theta,
              "tie_word_embeddings": False, "max_position_embeddings": tiny.context_length}
    if quantization is not None:
        config["quantization"] = quantization
    (d / "config.json").write_text(json.dumps(config))
    mx.save_safetensors(str(d / "model.safetensors"), dict(tree_flatten(tiny.model.parameters())))
    (tokenizer or tiny.tokenizer)._tokenizer.save_pretrained(str(d))
    return d
