"""Issue #52, the model library: a VLM directory (a vision config; mlx-vlm's format) is
listed as seeing images and loads as one; a family whose images do not run here yet says
so and why; a GGUF with an mmproj*.gguf beside it sees images and loads as the pair
(engine/vision/mmproj.py), or, when the projector does not pair, says why and reads text;
the projector is not listed as a model of its own."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from app.models.cli import table
from app.models.inspect import memory_need
from app.models.library import list_models
from engine import Engine
from engine.loader.gguf_file import read_gguf_file
from tests.engine.test_loader import make_tiny_gguf
from tests.mmproj_models import make_tiny_pair, write_mmproj
from tests.vision_models import make_tiny_vlm


@pytest.fixture
def disk(tmp_path, monkeypatch):
    monkeypatch.setenv("BATCHCHAT_MODEL_DIR", str(tmp_path / "batchchat"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "batchchat").mkdir()
    return tmp_path / "batchchat"


def by_name():
    return {e.name: e for e in list_models()}


@pytest.mark.parametrize("family", ["smolvlm", "gemma4", "qwen3_vl_moe", "pixtral"])
def test_a_vlm_directory_sees_images_and_loads_as_one(disk, family):
    make_tiny_vlm(disk / f"tiny-{family}", family)
    e = by_name()[f"tiny-{family}"]
    assert (e.format, e.architecture, e.sees_images, e.loads) == ("mlx-vlm", family,
                                                                   True, True)
    assert e.input == "text + images" and e.row()["input"] == "text + images"
    assert "text + images" in table([e])
    assert Engine.load(e.source).sees_images  # what the library says is what loads


def test_a_vision_family_not_run_yet_says_why(disk):
    folder = make_tiny_vlm(disk / "tiny-qwen-vl", "idefics3")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"model_type": "kimi_vl"}))
    e = by_name()["tiny-qwen-vl"]
    assert e.sees_images and e.input == "text (images: not yet)"
    assert "the engine runs images for" in e.images_reason


# qwen: a qwen2vl GGUF; gemma4: a gemma4v projector (its own clip.vision.projector_type key)
@pytest.mark.parametrize("family", ["smolvlm", "qwen2_5_vl", "gemma4"])
def test_a_gguf_with_an_mmproj_beside_it_loads_as_a_pair(disk, family):
    _, text, mmproj = make_tiny_pair(disk, family)
    models = by_name()
    e = models[text.relative_to(disk).as_posix().removesuffix(".gguf")]
    assert (e.format, e.sees_images, e.loads, e.images_reason) == ("GGUF", True, True, "")
    assert e.input == "text + images" and "text + images" in table([e])
    assert not any("mmproj" in name for name in models)  # the projector is not a model
    engine = Engine.load(e.source)  # what the library says is what loads: the pair
    assert engine.sees_images and mmproj.name in engine.description
    # the model manager's estimate counts the tower and projector, held float32
    alone = disk.parent / "alone" / text.name
    alone.parent.mkdir()
    shutil.copy(text, alone)
    elements = sum(math.prod(t.shape) for t in read_gguf_file(mmproj).tensors.values())
    assert memory_need(text).weights - memory_need(alone).weights == 4 * elements


def test_a_projector_that_does_not_pair_says_why(disk):
    make_tiny_gguf(disk / "tiny-llama.F32.gguf")
    models = by_name()
    assert models["tiny-llama.F32"].input == "text"  # no projector: text only
    shutil.copy(disk / "tiny-llama.F32.gguf", disk / "mmproj-tiny-f16.gguf")  # no CLIP file
    e = by_name()["tiny-llama.F32"]
    assert e.sees_images and e.loads  # its text loads; its images do not, and why
    assert e.input == "text (images: not yet)"
    assert "mmproj-tiny-f16.gguf" in e.images_reason and "not a CLIP projector" in e.images_reason
    (disk / "mmproj-tiny-f16.gguf").unlink()
    vlm, _, _ = make_tiny_pair(disk.parent / "elsewhere", "idefics3")
    write_mmproj(vlm, disk / "mmproj-other.gguf", projector="llava")
    e = by_name()["tiny-llama.F32"]
    assert e.input == "text (images: not yet)" and "projector type 'llava'" in e.images_reason
    engine = Engine.load(e.source)  # it loads reading text, and says why
    assert not engine.sees_images and "llava" in engine.notes[0]
