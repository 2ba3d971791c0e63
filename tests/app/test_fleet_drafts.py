"""Draft models across models (issue #50, follow-up 4): a draft model (`--speculative
draft:PATH`, the window's Speculative decoding setting) drafts only for a model that shares
its tokenizer. A model manager's other model with another tokenizer (a tab or a request on
model B) used to fail its load ("draft model …: its tokenizer differs"); it now loads
without the draft, drafting by n-gram, and says so in its notes, through both loaders: the
manager's own (`batchchat serve --models-dir`) and the window's (app/fleet/window.py).
Real engines: the bundled model, its Q8_0 copy (the same tokenizer) and a tiny random llama
(another one). Qt-free."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.backend.local_target import LocalTarget, default_loader, load_target
from app.fleet import Catalog, ModelManager
from app.fleet.window import window_fleet
from app.models.library import folder_models
from engine.public import ModelLoadError
from tests.fleet_models import bundled_path, requantize, tiny_gguf
from tests.session_files import file_hash

PROMPT = [{"role": "user", "content": "Count from one to twelve in words."}]
GREEDY = {"max_tokens": 32, "temperature": 0.0}
KV = 16 << 20


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fleet-drafts")
    requantize(bundled_path(), d / "smol-q8.gguf", "Q8_0")
    tiny_gguf(d / "tiny-a.gguf", seed=0)
    return d


async def answer(target: LocalTarget) -> str:
    stream = target.submit(PROMPT, params=GREEDY)
    async for _ in stream:
        pass
    return stream.text


_ALONE: dict[str, str] = {}  # a file's bytes (hash) -> its greedy answer, made once


async def alone(source: Path) -> str:
    """The model's own greedy answer, no draft: the reference. The three tests ask it of the
    same files (the same Q8_0 copy, the same tiny model), so each file's bytes are loaded and
    answered once a module (a load and a reply: ~2-3 CPU-s each)."""
    key = file_hash(source)
    if key not in _ALONE:
        target = load_target(str(source), kv_budget_bytes=KV, speculative="off")
        await target.start()
        try:
            _ALONE[key] = await answer(target)
        finally:
            await target.shutdown()
    return _ALONE[key]


async def check_the_two_models(fleet: ModelManager, models_dir: Path, draft: str) -> None:
    """smol-q8 drafts with the draft model; tiny-a loads without it; both answer as alone."""
    async with await fleet.acquire("tiny-a") as tiny:
        stats = tiny.stats()
        assert stats.speculative == "ngram"
        assert any(f"draft model {draft} left out: its tokenizer differs" in note
                   for note in tiny.notes), tiny.notes
        assert await answer(tiny) == await alone(models_dir / "tiny-a.gguf")
    async with await fleet.acquire("smol-q8") as smol:
        assert smol.stats().speculative == f"draft:{draft}"
        assert not any("left out" in note for note in smol.notes)
        text = await answer(smol)
        assert smol.stats().drafted_tokens > 0, "the draft model drafted for it"
        assert text == await alone(models_dir / "smol-q8.gguf")


async def test_serve_models_dir_drafts_only_for_a_model_with_the_same_tokenizer(models_dir):
    draft = str(bundled_path())
    fleet = ModelManager(Catalog(lambda: folder_models(models_dir)), kv_budget_bytes=KV,
                         max_concurrent=4, speculative=f"draft:{draft}")
    try:
        await check_the_two_models(fleet, models_dir, draft)
    finally:
        await fleet.close()


async def test_the_windows_models_draft_only_with_the_same_tokenizer(models_dir):
    from engine import EngineConfig

    draft = str(bundled_path())
    loader = default_loader(EngineConfig(max_concurrent=4, kv_budget_bytes=KV),
                            speculative=lambda: f"draft:{draft}")
    fleet = window_fleet(lambda: [str(models_dir)], lambda: loader)
    try:
        await check_the_two_models(fleet, models_dir, draft)
    finally:
        await fleet.close()
    # the default model itself (the same loader, as the ModelHost calls it) is still
    # refused a draft with another tokenizer: the user chose it for that model
    with pytest.raises(ModelLoadError, match="tokenizer differs"):
        loader(str(models_dir / "tiny-a.gguf"))


async def test_a_loaded_model_drafts_for_another_and_is_kept_while_it_does(tmp_path):
    """Issue #50 (4): a draft named by a model the manager has loaded reads that model's
    engine (no second copy), the answers are the target's own, and the model lending its
    weights is not evicted while the target runs (unloading it would free nothing): a third
    load evicts the target instead, though it was used last; then nothing is lent."""
    from engine import testing
    from engine.draft_model import DraftModel

    (tmp_path / "smol.gguf").symlink_to(bundled_path())  # the library's small model
    requantize(bundled_path(), tmp_path / "smol-q8.gguf", "Q8_0")
    tiny_gguf(tmp_path / "tiny-a.gguf", seed=0)
    draft = str(tmp_path / "smol.gguf")
    fleet = ModelManager(Catalog(lambda: folder_models(tmp_path)), kv_budget_bytes=KV,
                         max_concurrent=4, max_models=2, speculative=f"draft:{draft}")
    try:
        async with await fleet.acquire("smol") as smol:
            pass
        assert not smol.lends_draft
        async with await fleet.acquire("smol-q8") as q8:
            source = testing.facts(q8.engine).draft_source
            assert isinstance(source, DraftModel) and source.shared
            assert source.runner.model is testing.facts(smol.engine).module_tree
            text = await answer(q8)
            assert q8.stats().drafted_tokens > 0
        assert text == await alone(tmp_path / "smol-q8.gguf")
        assert smol.lends_draft
        # room for one more: the least recently used is smol, but it lends its weights
        async with await fleet.acquire("tiny-a"):
            pass
        assert sorted(m.name for m in fleet.running()) == ["smol", "tiny-a"]
        assert not smol.lends_draft  # the target's engine stopped: nothing lent
    finally:
        await fleet.close()
