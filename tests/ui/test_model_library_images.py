"""Issue #52, "the model library says 'sees images' and does not list them as text-only",
in the window's library dialog (pytest-qt, offscreen): a VLM folder and a GGUF with its
mmproj beside it show "text + images" in the Input column, the projector file is no row
of its own, and a plain text GGUF shows "text". tests/app/test_model_library_vision checks
the entries and the CLI's table; this checks what the dialog shows of them."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.bridge import EngineBridge
from tests.mmproj_models import make_tiny_pair
from tests.ui.test_model_library import cells
from tests.vision_models import make_tiny_vlm
from ui.models.library_dialog import ModelLibraryDialog


@pytest.fixture
def disk(tmp_path: Any, monkeypatch: Any) -> Any:
    monkeypatch.setenv("BATCHCHAT_MODEL_DIR", str(tmp_path / "batchchat"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "batchchat").mkdir()
    return tmp_path / "batchchat"


def test_the_library_dialog_says_which_models_see_images(make_window: Any, disk: Any) -> None:
    make_tiny_vlm(disk / "tiny-smolvlm", "smolvlm")
    _, text, mmproj = make_tiny_pair(disk, "smolvlm")  # a GGUF + mmproj pair, and its folder
    pair = text.relative_to(disk).as_posix().removesuffix(".gguf")
    window = make_window(EngineBridge())
    dialog = window.choose_model()
    assert isinstance(dialog, ModelLibraryDialog) and dialog.isVisible()
    shown = cells(dialog)
    header = [dialog.proxy.headerData(c, Qt.Orientation.Horizontal)
              for c in range(dialog.proxy.columnCount())]
    inputs = {name: row[header.index("Input")] for name, row in shown.items()}
    assert inputs["tiny-smolvlm"] == "text + images"
    assert inputs[pair] == "text + images"
    assert not any(mmproj.stem in name for name in inputs)  # the projector is no model
    assert inputs["SmolLM2-135M-Instruct (bundled)"] == "text"

