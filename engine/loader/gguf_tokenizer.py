"""Build a Hugging Face fast tokenizer from a GGUF file's tokenizer metadata.

GGUF stores byte-level BPE ("gpt2" model) as a token list, merge list, token types
and a pre-tokenizer name (``tokenizer.ggml.pre``). We rebuild it with the
``tokenizers`` library (no hand-written BPE) and reproduce llama.cpp's
pre-tokenizer regexes for the names we know (llama-vocab.cpp's lists, copied as they are).
SentencePiece-style vocabularies ("llama": Llama 2, Mistral v0.1-0.3, Phi-3, Gemma 1-3;
"gemma4"; "t5") are built by transformers' GGUF integration (``convert_gguf_tokenizer``),
which knows their normalizers and how to recover their merges from the scores.
tests/engine/test_gguf_vocab.py holds both to llama.cpp's own test vocabularies.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)
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
_GPT2_PRE = {"gpt-2", "gpt2", "mpt", "olmo", "jais", "phi-2", "gigachat", "mellum",
             "exaone4", "a.x-4.0", "roberta-bpe", "jina-es", "jina-de"}
# llama.cpp: "\p{N}" split first (each digit alone), then the GPT-2 regex. SmolLM's own
# tokenizer.json says the same: Digits(individual_digits=True) + ByteLevel.
_DIGITS_GPT2_PRE = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone",
                    "minerva-7b"}
_LLAMA3_PRE = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
               "lfm2", "jina-v5-nano", "dbrx", "smaug-bpe"}
_QWEN2_PRE = {"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "kormo", "f2llmv2"}
# Pre-tokenizers that are several regexes applied in turn (llama-vocab.cpp's regex_exprs).
_SPLITS: dict[str, tuple[str, ...]] = {
    'deepseek-llm': (
        '[\r\n]',
        '\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+',  # noqa: E501 - llama.cpp's regex as it is
        '\\s?[!-/:-~！-／：-～‘-‟\u3000-。]+',
        '\\s+$',
        '[一-龥ࠀ-一가-\ud7ff]+',
        '\\p{N}+',
    ),
    'deepseek-coder': (
        '[\r\n]',
        '\\s?\\p{L}+',
        '\\s?\\p{P}+',
        '[一-龥ࠀ-一가-\ud7ff]+',
        '\\p{N}',
    ),
    'falcon': (
        '[\\p{P}\\$\\+<=>\\^~\\|`]+',
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        '[0-9][0-9][0-9]',
    ),
    'qwen35': (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",  # noqa: E501
    ),
    'deepseek-v3': (
        '\\p{N}{1,3}',
        '[一-龥\u3040-ゟ゠-ヿ]+',
        '[!"#$%&\'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+',  # noqa: E501 - llama.cpp's regex as it is
    ),
    'hunyuan-dense': (
        '\\p{N}{1,3}',
        '[一-龥\u3040-ゟ゠-ヿ]+',
        '[!"#$%&\'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+',  # noqa: E501 - llama.cpp's regex as it is
    ),
    'joyai-llm': (
        '\\p{N}{1,3}',
        '[一-龥\u3040-ゟ゠-ヿ]+',
        '[!"#$%&\'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+',  # noqa: E501 - llama.cpp's regex as it is
    ),
    'chatglm-bpe': (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",  # noqa: E501
    ),
    'glm4': (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",  # noqa: E501
    ),
}
# The original tokenizer.json regex (llama.cpp rewrites it for its own regex engine).
_SPLITS["tekken"] = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",)
# llama-vocab.cpp sets ignore_merges for these: a whole word in the vocabulary is one token.
_IGNORE_MERGES = {"tekken", "glm4", "glm5"}


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
    if pre in _SPLITS:
        splits = [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False)
                  for r in _SPLITS[pre]]
        return pre_tokenizers.Sequence([*splits, byte_level_plain]), pre in _IGNORE_MERGES
    if pre != "default":
        log.warning("%s: unknown GGUF pre-tokenizer %r; using llama.cpp's default", source, pre)
    splits = [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False)
              for r in _DEFAULT_RES]
    return pre_tokenizers.Sequence([*splits, byte_level_plain]), False


# tokenizer.ggml.model values transformers' GGUF integration builds (SentencePiece-style)
SENTENCEPIECE_MODELS = frozenset({"llama", "gemma4", "t5"})
SUPPORTED_MODELS = frozenset({"gpt2", "bert"}) | SENTENCEPIECE_MODELS


def _byte_level(metadata: Mapping[str, Any], tokens: list[str], token_types: list[int],
                source: str) -> Tokenizer:
    vocab: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        vocab.setdefault(tok, i)  # duplicates (rare padding entries) keep the first id
    merges: list[tuple[str, str]] = []
    for m in metadata.get("tokenizer.ggml.merges") or []:
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
    return tok


def _sentencepiece(metadata: Mapping[str, Any], source: str) -> Tokenizer:
    """transformers' own builder for this vocabulary (its normalizer, merges and specials).

    A plain "llama" vocabulary gets the builder transformers uses for Phi-3: llama.cpp puts
    one space before the text and turns every space into "▁" (a normalizer), where the
    Metaspace pre-tokenizer of transformers' LlamaTokenizer folds a leading space into its
    own prefix (" " is "▁▁" in llama.cpp, "▁" there)."""
    from transformers.integrations.gguf import gguf_tokenizer_mapping as t

    fields = {name: metadata[f"tokenizer.{key}"]
              for key, name in t.GGUF_TOKENIZER_MAPPING["tokenizer"].items()
              if f"tokenizer.{key}" in metadata}
    for key in ("tokens", "scores", "token_type", "merges"):
        if key in fields:
            fields[key] = _as_list(fields[key])
    arch = str(metadata.get("general.architecture"))
    kind = fields.get("tokenizer_type")
    try:
        if kind == "llama" and arch not in t.GGUF_SENTENCEPIECE_BUILDERS \
                and _scalar(fields.get("add_prefix_space", True)):
            built = t.phi3_tokenizer(fields)
        else:
            built = t.select_tokenizer_builder(arch, kind)(fields)
        built = t.set_split_regex(t.add_gguf_special_tokens(built, fields), fields)
    except (ValueError, KeyError, TypeError) as e:
        raise ModelLoadError(f"{source}: cannot build its {kind!r} tokenizer: {e}") from e
    return built.backend_tokenizer


def _wordpiece(tokens: list[str], token_types: list[int]) -> Tokenizer:
    """BERT's WordPiece ("bert": embedding models). llama.cpp's converter marks a word's
    first piece with "▁" and drops the "##" of the others; the tokens go back to BERT's
    spelling and BERT's own normalizer (lowercase, accents off) and pre-tokenizer apply."""
    vocab: dict[str, int] = {}
    for i, (tok, kind) in enumerate(zip(tokens, token_types, strict=True)):
        if kind == TOKEN_CONTROL or (tok.startswith("[") and tok.endswith("]")):
            word = tok
        else:
            word = tok[1:] if tok.startswith("\u2581") else "##" + tok
        vocab.setdefault(word, i)
    unk = "[UNK]" if "[UNK]" in vocab else tokens[0]
    tok = Tokenizer(models.WordPiece(vocab, unk_token=unk, max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, kind in zip(tokens, token_types, strict=True)
                            if kind == TOKEN_CONTROL])
    return tok


def is_byte_level(metadata: Mapping[str, Any]) -> bool:
    """Byte-level BPE (mlx-lm's BPE streaming detokenizer applies) or SentencePiece-style."""
    return metadata.get("tokenizer.ggml.model") == "gpt2"


def _wrap(tok: Tokenizer, **kwargs: Any) -> PreTrainedTokenizerFast:
    """A PreTrainedTokenizerFast over `tok` itself. Given as ``tokenizer_object``,
    transformers deep-copies it (a JSON round trip: ~0.3 s of a 152k-token vocabulary's
    load); `tok` was built here for this one wrapper, so the copy is needed by no one. An
    instance whose backend is already set is one transformers' own __init__ takes as it is
    (its `self._tokenizer is None` branches); a version that does not falls back."""
    hf = PreTrainedTokenizerFast.__new__(PreTrainedTokenizerFast)
    hf._tokenizer = tok
    try:
        hf.__init__(**kwargs)
    except ValueError:  # this transformers needs a tokenizer source: hand it the object
        return PreTrainedTokenizerFast(tokenizer_object=tok, **kwargs)
    return hf


def build_gguf_tokenizer(metadata: Mapping[str, Any], source: str) -> PreTrainedTokenizerFast:
    """A PreTrainedTokenizerFast equivalent to llama.cpp's tokenizer for this GGUF."""
    model_name = metadata.get("tokenizer.ggml.model")
    if model_name is None:
        raise ModelLoadError(f"{source}: GGUF has no tokenizer (tokenizer.ggml.model missing)")
    if model_name not in SUPPORTED_MODELS:
        raise ModelLoadError(
            f"{source}: GGUF tokenizer model {model_name!r} is not supported (supported: "
            f"{', '.join(sorted(SUPPORTED_MODELS))})")
    tokens: list[str] = list(metadata.get("tokenizer.ggml.tokens") or [])
    if not tokens:
        raise ModelLoadError(f"{source}: GGUF tokenizer has no tokens")
    types_raw = metadata.get("tokenizer.ggml.token_type")
    token_types = _as_list(types_raw) if types_raw is not None else [TOKEN_NORMAL] * len(tokens)
    if len(token_types) != len(tokens):
        raise ModelLoadError(f"{source}: GGUF tokenizer has {len(tokens)} tokens but "
                             f"{len(token_types)} token types")
    if model_name == "gpt2":
        tok = _byte_level(metadata, tokens, token_types, source)
    elif model_name == "bert":
        tok = _wordpiece(tokens, token_types)
    else:
        tok = _sentencepiece(metadata, source)

    def token_at(key: str) -> str | None:
        value = metadata.get(key)
        if value is None:
            return None
        idx = int(_scalar(value))
        return tokens[idx] if 0 <= idx < len(tokens) else None

    bos = token_at("tokenizer.ggml.bos_token_id")
    # llama.cpp adds BOS to a SentencePiece vocabulary that does not say otherwise
    add_bos = bool(_scalar(metadata.get("tokenizer.ggml.add_bos_token", model_name == "llama")))
    if add_bos and bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
            special_tokens=[(bos, tok.token_to_id(bos))])
    else:
        tok.post_processor = processors.TemplateProcessing(single="$A", pair="$A $B")

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
    hf = _wrap(tok, clean_up_tokenization_spaces=False, **kwargs)
    # Every control token is special (so decode(skip_special_tokens=True) drops them).
    specials = [t for t, ty in zip(tokens, token_types, strict=True) if ty == TOKEN_CONTROL]
    missing = [t for t in specials if t not in hf.all_special_tokens]
    if missing:
        # "additional_special_tokens" works in transformers 4 and 5 (v5 renames it).
        hf.add_special_tokens({"additional_special_tokens": missing})
    return hf
