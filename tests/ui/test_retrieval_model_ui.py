"""Preferences → Chat with files → Retrieval model (issue #51), in the window offscreen:
keyword only, the bundled model, a loaded model or the library's models (listed off the UI
thread); Save keeps it in settings.json and retrieval embeds with it from the next
question on (the process's index cache); keyword only takes the model away again; a
saved file that has gone is shown as saved and retrieval falls back to BM25."""

from __future__ import annotations

import logging

import pytest
from PySide6.QtCore import Qt

from app.attachments.messages import shared_cache
from app.context import AppContext
from app.models.library import BUNDLED_NAME
from app.settings import Settings
from tests.engine.test_loader import make_tiny_gguf
from tests.ui.conftest import run_until
from ui.preferences import open_preferences
from ui.preferences.retrieval_box import KEYWORD_ONLY


@pytest.fixture
def disk(tmp_path, monkeypatch):
    """Model places of this test only: a folder holding a tiny GGUF, nothing else."""
    monkeypatch.setenv("BATCHCHAT_MODEL_DIR", str(tmp_path / "batchchat"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folder = tmp_path / "models"
    folder.mkdir()
    make_tiny_gguf(folder / "tiny-llama.F32.gguf")
    return folder


def _choices(box) -> dict[str, str]:
    return {box.itemText(i): box.itemData(i) for i in range(box.count())}


def test_the_retrieval_model_is_chosen_saved_and_used(window, settings, loop, qtbot, disk,
                                                      monkeypatch, tmp_path):
    monkeypatch.setattr(shared_cache(), "embedder", None)  # restored after the test
    settings.model_folders = [str(disk)]
    loaded = tmp_path / "chat-model.gguf"
    loaded.write_bytes(b"")  # the model serving now, by its path
    dialog = open_preferences(settings, window, loaded=[str(loaded), "tiny"])
    box = dialog.retrieval
    assert box.currentText() == KEYWORD_ONLY and box.value() == ""
    run_until(loop, lambda: box.listing is not None and box.listing.done(), timeout=20)
    choices = _choices(box)
    gguf = str(disk / "tiny-llama.F32.gguf")
    assert choices[KEYWORD_ONLY] == "" and choices[BUNDLED_NAME] == "bundled"
    assert choices["chat-model (loaded)"] == str(loaded)
    assert gguf in choices.values()  # the library's model, listed off the UI thread
    assert "tiny" not in choices.values()  # not a file: nothing retrieval could load
    assert list(choices.values()).count("bundled") == 1

    box.setCurrentIndex(box.findData(gguf))
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert not dialog.isVisible()
    assert Settings.load(settings.path).retrieval_model == gguf
    embedder = shared_cache().embedder
    assert embedder is not None and embedder.name == f"mean-pooled:{gguf}"

    # opened again: the saved choice; keyword only takes the model away
    dialog = open_preferences(settings, window)
    assert dialog.retrieval.value() == gguf
    dialog.retrieval.setCurrentIndex(dialog.retrieval.findData(""))
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert Settings.load(settings.path).retrieval_model == ""
    assert shared_cache().embedder is None


def test_a_saved_model_that_has_gone_is_shown_and_retrieval_keeps_to_bm25(
        window, settings, loop, qtbot, monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(shared_cache(), "embedder", None)
    gone = str(tmp_path / "moved-away.gguf")
    with caplog.at_level(logging.WARNING):
        settings.set_retrieval_model(gone)  # AppContext (the window's) hears of it
    assert shared_cache().embedder is None and "moved-away" in caplog.text
    dialog = open_preferences(settings, window)
    assert dialog.retrieval.value() == gone and dialog.retrieval.currentText() == "moved-away"
    # the bundled model, chosen and saved, is used
    dialog.retrieval.setCurrentIndex(dialog.retrieval.findData("bundled"))
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert shared_cache().embedder.name == "mean-pooled:bundled"
    # a new app context (the next start) reads it from settings.json
    monkeypatch.setattr(shared_cache(), "embedder", None)
    AppContext(Settings.load(settings.path), window.ctx.bridge)
    assert shared_cache().embedder.name == "mean-pooled:bundled"
