"""Build a Hugging Face fast tokenizer from a GGUF file's tokenizer metadata.

GGUF stores byte-level BPE ("gpt2" model) as a token list, merge list, token types
and a pre-tokenizer name (``tokenizer.ggml.pre``). We rebuild it with the
``tokenizers`` library (no hand-written BPE) and reproduce llama.cpp's
pre-tokenizer regexes for the names we know.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from .errors import ModelLoadError

log = logging.getLogger(__name__)

# GGUF token types (llama.cpp's llama_token_type)
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = (
    1, 2, 3, 4, 5, 6)

# The regexes are those of llama.cpp's llama-vocab.cpp (== the HF tokenizer.json of each
# family). GPT-2's regex is what ByteLevel(use_regex=True) applies by itself.
_LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
              r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# llama.cpp's fallback when a file names no pre-tokenizer: punctuation runs split off
# first, then GPT-2's regex, then digit runs, then 3-digit groups.
_DEFAULT_RES = (r"[\p{P}\$\+<=>\^~\|]+",
                r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
                r"\p{N}+", r"[0-9][0-9][0-9]")
_GPT2_PRE = {"gpt-2", "gpt2", "mpt", "olmo", "jais"}
# llama.cpp: "\p{N}" split first (each digit alone), then the GPT-2 regex. SmolLM's own
# tokenizer.json says the same: Digits(individual_digits=True) + ByteLevel.
_DIGITS_GPT2_PRE = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone",
                    "minerva-7b"}
_LLAMA3_PRE = {"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"}
_QWEN2_PRE = {"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}


def _scalar(value: Any) -> Any:
    """GGUF scalars arrive as 0-d mx.arrays; give back a python value."""
    return value.item() if hasattr(value, "item") else value


def _as_list(value: Any) -> list:
    return value.tolist() if hasattr(value, "tolist") else list(value)


def _pre_tokenizer(pre: str, add_prefix_space: bool,
                   source: str) -> tuple[pre_tokenizers.PreTokenizer, bool]:
    """(pre-tokenizer, ignore_merges) for a GGUF ``tokenizer.ggml.pre`` name."""
    byte_level_regex = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space,
                                                use_regex=True)
    byte_level_plain = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space,
                                                use_regex=False)
    if pre in _DIGITS_GPT2_PRE:
        return pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level_regex]), False
    if pre in _LLAMA3_PRE:
        split = pre_tokenizers.Split(Regex(_LLAMA3_RE), behavior="isolated", invert=False)
        return pre_tokenizers.Sequence([split, byte_level_plain]), True
    if pre in _QWEN2_PRE:
        split = pre_tokenizers.Split(Regex(_QWEN2_RE), behavior="isolated", invert=False)
        return pre_tokenizers.Sequence([split, byte_level_plain]), False
    if pre in _GPT2_PRE:
        return byte_level_regex, False
    if pre != "default":
        log.warning("%s: unknown GGUF pre-tokenizer %r; using llama.cpp's default", source, pre)
    splits = [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False)
              for r in _DEFAULT_RES]
    return pre_tokenizers.Sequence([*splits, byte_level_plain]), False


def build_gguf_tokenizer(metadata: Mapping[str, Any], source: str) -> PreTrainedTokenizerFast:
    """A PreTrainedTokenizerFast equivalent to llama.cpp's tokenizer for this GGUF."""
    model_name = metadata.get("tokenizer.ggml.model")
    if model_name is None:
        raise ModelLoadError(f"{source}: GGUF has no tokenizer (tokenizer.ggml.model missing)")
    if model_name != "gpt2":
        raise ModelLoadError(
            f"{source}: GGUF tokenizer model {model_name!r} is not supported; only byte-level "
            "BPE ('gpt2', as in SmolLM, Llama 3, Qwen 2) is")
    tokens: list[str] = list(metadata.get("tokenizer.ggml.tokens") or [])
    merges_raw: list[str] = list(metadata.get("tokenizer.ggml.merges") or [])
    if not tokens:
        raise ModelLoadError(f"{source}: GGUF tokenizer has no tokens")
    types_raw = metadata.get("tokenizer.ggml.token_type")
    token_types = _as_list(types_raw) if types_raw is not None else [TOKEN_NORMAL] * len(tokens)
    if len(token_types) != len(tokens):
        raise ModelLoadError(f"{source}: GGUF tokenizer has {len(tokens)} tokens but "
                             f"{len(token_types)} token types")

    vocab: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        vocab.setdefault(tok, i)  # duplicates (rare padding entries) keep the first id
    merges: list[tuple[str, str]] = []
    for m in merges_raw:
        a, sep, b = m.partition(" ")
        if not sep:
            raise ModelLoadError(f"{source}: malformed GGUF merge {m!r}")
        merges.append((a, b))

    pre = str(metadata.get("tokenizer.ggml.pre", "default"))
    add_prefix_space = bool(_scalar(metadata.get("tokenizer.ggml.add_space_prefix", False)))
    pre_tok, ignore_merges = _pre_tokenizer(pre, add_prefix_space, source)

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False,
                               ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tok
    tok.decoder = decoders.ByteLevel()

    # Control tokens (<|im_start|>, <|im_end|>, ...) must be matched whole before BPE,
    # or the chat template's markers get split into byte pieces.
    added = []
    for text, ttype in zip(tokens, token_types, strict=True):
        if ttype == TOKEN_CONTROL:
            added.append(AddedToken(text, special=True, normalized=False))
        elif ttype == TOKEN_USER_DEFINED:
            added.append(AddedToken(text, special=False, normalized=False))
    tok.add_tokens(added)

    def token_at(key: str) -> str | None:
        value = metadata.get(key)
        if value is None:
            return None
        idx = int(_scalar(value))
        return tokens[idx] if 0 <= idx < len(tokens) else None

    bos = token_at("tokenizer.ggml.bos_token_id")
    add_bos = bool(_scalar(metadata.get("tokenizer.ggml.add_bos_token", False)))
    if add_bos and bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
            special_tokens=[(bos, vocab[bos])])

    kwargs: dict[str, Any] = {}
    for name, key in (("bos_token", "tokenizer.ggml.bos_token_id"),
                      ("eos_token", "tokenizer.ggml.eos_token_id"),
                      ("unk_token", "tokenizer.ggml.unknown_token_id"),
                      ("pad_token", "tokenizer.ggml.padding_token_id")):
        text = token_at(key)
        if text is not None:
            kwargs[name] = text
    chat_template = metadata.get("tokenizer.chat_template")
    if chat_template:
        kwargs["chat_template"] = str(chat_template)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False,
                                 **kwargs)
    # Every control token is special (so decode(skip_special_tokens=True) drops them).
    specials = [t for t, ty in zip(tokens, token_types, strict=True) if ty == TOKEN_CONTROL]
    missing = [t for t in specials if t not in hf.all_special_tokens]
    if missing:
        # "additional_special_tokens" works in transformers 4 and 5 (v5 renames it).
        hf.add_special_tokens({"additional_special_tokens": missing})
    return hf
