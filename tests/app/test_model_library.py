"""Issue #32: the model library lists the models on the disk (BatchChat's folder, the hub
cache, LM Studio's folders, added folders) with what each is, read from headers without
loading weights; broken and partial files are listed with the reason, never a crash; and
its "loads here" agrees with what the loader does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten

from app.models.library import BUNDLED_NAME, find_models, list_models
from app.settings import Settings
from engine.loader import ModelLoadError, load_model
from tests.app.gguf_bytes import write_gguf
from tests.engine.test_loader import make_tiny_gguf
from tests.tiny_model import place_in_hub_cache, save_tiny_dir


@pytest.fixture
def disk(tmp_path, monkeypatch):
    """Empty model places: BatchChat's folder, the hub cache and a home for LM Studio."""
    monkeypatch.setenv("BATCHCHAT_MODEL_DIR", str(tmp_path / "batchchat"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def by_name(entries):
    return {e.name: e for e in entries}


def test_a_model_in_the_hub_cache_is_listed_with_its_fields(disk, tiny):
    src = save_tiny_dir(tiny, disk / "src", context_length=777)
    snapshot = place_in_hub_cache(src, disk / "hub", "test-org/tiny-llama")
    models = by_name(list_models())
    bundled = models[BUNDLED_NAME]  # not fetched yet: listed, loaded (fetched) on demand
    assert bundled.source == "bundled" and bundled.loads and bundled.path is None
    e = models["test-org/tiny-llama"]
    assert (e.source, e.place, e.format) == (str(snapshot), "Hugging Face", "mlx-lm")
    assert (e.architecture, e.context_length, e.quantization) == ("llama", 777, "f32")
    assert e.parameters == sum(v.size for _, v in tree_flatten(tiny.model.parameters()))
    assert e.size_bytes == sum(p.stat().st_size for p in src.iterdir())
    assert e.loads and e.reason == ""
    assert e.row()["params"] == f"{e.parameters / 1e3:.0f}K" and e.row()["loads"] == "yes"


def test_gguf_fields_come_from_its_header(disk):
    folder = disk / "batchchat"
    folder.mkdir()
    tensors = make_tiny_gguf(folder / "tiny-llama.F32.gguf")
    [e] = [m for m in list_models() if m.name == "tiny-llama.F32"]
    assert (e.place, e.format, e.architecture, e.quantization) == ("BatchChat", "GGUF",
                                                                    "llama", "F32")
    assert e.parameters == sum(t.size for t in tensors.values())
    assert e.size_bytes == (folder / "tiny-llama.F32.gguf").stat().st_size and e.loads


@pytest.mark.bundled
def test_the_bundled_model_reads_as_the_loader_sees_it(monkeypatch, tmp_path):
    from mlx_lm.utils import get_total_parameters

    from engine.loader import bundled_model_path

    path = bundled_model_path()
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    e = by_name(list_models())[BUNDLED_NAME]
    assert (e.source, e.path, e.quantization, e.architecture) == ("bundled", path, "Q4_1",
                                                                  "llama")
    loaded = load_model("bundled", quantized=True)
    assert e.context_length == loaded.context_length == 8192
    assert e.parameters == get_total_parameters(loaded.model)


def split_and_lose_a_shard(d: Path) -> None:
    """Two shards and their index, as a hub repo has them; the second never arrived."""
    weights = mx.load(str(d / "model.safetensors"))
    (d / "model.safetensors").unlink()
    names = sorted(weights)
    shards = {"model-00001-of-00002.safetensors": names[::2],
              "model-00002-of-00002.safetensors": names[1::2]}
    for file, part in shards.items():
        mx.save_safetensors(str(d / file), {n: weights[n] for n in part})
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {n: f for f, part in shards.items() for n in part}}))
    (d / "model-00002-of-00002.safetensors").unlink()


def make_broken_models(root: Path, good: Path, tiny_gguf: Path) -> None:
    root.mkdir(parents=True)
    (root / "empty.gguf").write_bytes(b"")
    (root / "text.gguf").write_text("not a model at all")
    data = tiny_gguf.read_bytes()
    (root / "half.gguf").write_bytes(data[: len(data) // 2])
    (root / "header-only.gguf").write_bytes(data[:200])
    make_tiny_gguf(root / "rwkv.gguf", arch="rwkv7")
    write_gguf(root / "kquant.gguf", {"general.architecture": "llama", "general.file_type": 15,
                                      "llama.context_length": 4096},
               [("token_embd.weight", (256, 8), 12), ("output_norm.weight", (256,), 0)])
    write_gguf(root / "q8k.gguf", {"general.architecture": "llama", "llama.block_count": 1,
                                   "llama.embedding_length": 256,
                                   "llama.attention.head_count": 4},
               [("token_embd.weight", (256, 8), 15), ("output_norm.weight", (256,), 0)])
    write_gguf(root / "vocab-only.gguf", {"general.architecture": "llama",
                                          "tokenizer.ggml.tokens": ["a", "b", "c"]}, [])
    for name, change in {
        "no-weights": lambda d: (d / "model.safetensors").unlink(),
        "bad-config": lambda d: (d / "config.json").write_text("{not json"),
        "odd-type": lambda d: (d / "config.json").write_text(json.dumps(
            json.loads((d / "config.json").read_text()) | {"model_type": "no_such_arch"})),
        "cut-weights": lambda d: (d / "model.safetensors").write_bytes(
            (d / "model.safetensors").read_bytes()[:5000]),
        "no-shard": split_and_lose_a_shard,
        "no-tokenizer": lambda d: (d / "tokenizer.json").unlink(),
    }.items():
        shutil.copytree(good, root / name)
        change(root / name)


REASONS = {
    "empty": "the file is empty", "text": "not a GGUF file", "half": "truncated",
    "header-only": "truncated", "rwkv": "architecture 'rwkv7' is not supported",
    "kquant": "metadata lacks llama.embedding_length", "q8k": "Q8_K tensors are not supported",
    "no-weights": "missing weights",
    "bad-config": "config.json is unreadable", "odd-type": "no model for model_type",
    "cut-weights": "truncated", "no-shard": "missing weights (model-00002-of-00002",
    "no-tokenizer": "no tokenizer files", "vocab-only": "no model weights in the file",
}


def test_broken_and_partial_models_are_listed_with_the_reason(disk, tiny):
    good = save_tiny_dir(tiny, disk / "good")
    tiny_gguf = disk / "tiny.gguf"
    make_tiny_gguf(tiny_gguf)
    make_broken_models(disk / "mine", good, tiny_gguf)
    settings = Settings(disk / "settings.json")
    assert settings.add_model_folder(str(disk / "mine"))
    models = by_name(list_models(Settings.load(disk / "settings.json").model_folders))
    for name, reason in REASONS.items():
        e = models[name]
        assert e.place == "Folder" and not e.loads and reason in e.reason, (name, e.reason)
    kquant = models["kquant"]
    assert (kquant.quantization, kquant.context_length, kquant.parameters) == \
        ("Q4_K_M", 4096, 256 * 8 + 256)


def test_loads_here_agrees_with_the_loader(disk, tiny):
    good = save_tiny_dir(tiny, disk / "good")
    tiny_gguf = disk / "tiny.gguf"
    make_tiny_gguf(tiny_gguf)
    make_broken_models(disk / "mine" / "broken", good, tiny_gguf)
    shutil.copytree(good, disk / "mine" / "good")
    shutil.copy(tiny_gguf, disk / "mine" / "good.gguf")
    entries = [e for e in list_models([disk / "mine"]) if e.place == "Folder"]
    assert {e.name for e in entries if e.loads} == {"good", "good.gguf".removesuffix(".gguf")}
    assert len(entries) == len(REASONS) + 2
    for e in entries:
        try:
            load_model(e.source)
            loaded = True
        except ModelLoadError:
            loaded = False
        assert loaded == e.loads, (e.name, e.reason)


def test_lm_studio_and_added_folders_are_named_by_their_path(disk, tiny):
    lms = disk / "home" / ".lmstudio" / "models"
    (lms / "someone" / "Tiny-GGUF").mkdir(parents=True)
    make_tiny_gguf(lms / "someone" / "Tiny-GGUF" / "tiny-Q8_0.gguf")
    save_tiny_dir(tiny, lms / "mlx-community" / "tiny-4bit")
    single = save_tiny_dir(tiny, disk / "one-model")  # an added folder that is one model
    models = by_name(list_models([single]))
    assert models["someone/Tiny-GGUF/tiny-Q8_0"].place == "LM Studio"
    assert models["mlx-community/tiny-4bit"].loads
    assert models["one-model"].place == "Folder"
    # `batchchat models info NAME`: the exact name, else the names it is part of
    entries = list(models.values())
    assert [e.name for e in find_models("one-model", entries)] == ["one-model"]
    assert [e.name for e in find_models("tiny-q8", entries)] == ["someone/Tiny-GGUF/tiny-Q8_0"]
    assert find_models("nothing-like-it", entries) == []


def test_added_folders_survive_a_restart(tmp_path):
    s = Settings(tmp_path / "settings.json")
    assert s.add_model_folder("/models/a") and not s.add_model_folder("/models/a")
    assert Settings.load(tmp_path / "settings.json").model_folders == ["/models/a"]
    s.remove_model_folder("/models/a")
    assert Settings.load(tmp_path / "settings.json").model_folders == []


def test_a_hub_model_is_named_by_its_repo_id_not_its_commit(disk, tiny):
    from app.bridge.switch import model_name as switch_name
    from app.models.names import model_name

    snapshot = place_in_hub_cache(save_tiny_dir(tiny, disk / "src"), disk / "hub", "org/tiny")
    gguf = snapshot / "sub" / "tiny.Q4_0.gguf"
    assert model_name(str(snapshot)) == "org/tiny" == switch_name(str(snapshot))
    assert model_name(str(gguf)) == "org/tiny/sub/tiny.Q4_0"
    assert model_name("bundled") == "SmolLM2-135M-Instruct"
    assert model_name("/models/x.Q8_0.gguf") == "x.Q8_0" and model_name("org/repo") == "org/repo"
