"""Issue #32: the model library dialog lists the models on the disk with their fields,
filters them, loads one (through MainWindow.load_model), downloads one by repo id from a
stand-in hub with a progress bar and Cancel; the model button names the model in use and
opens the library."""

from __future__ import annotations

import json
import shutil

import pytest
from mlx.utils import tree_flatten
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.bridge import BridgeState, EngineBridge
from tests.app.hub_standin import COMMIT, HubStandIn
from tests.tiny_model import place_in_hub_cache, save_tiny_dir
from tests.ui.conftest import run_until
from ui.models.library_dialog import ModelLibraryDialog

REPO = "test-org/tiny-llama"


@pytest.fixture
def disk(tmp_path, monkeypatch):
    monkeypatch.setenv("BATCHCHAT_MODEL_DIR", str(tmp_path / "batchchat"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


@pytest.fixture
def tiny_in_hub(disk, tiny):
    src = save_tiny_dir(tiny, disk / "src", context_length=1024)
    return place_in_hub_cache(src, disk / "hub", REPO)


def cells(dialog: ModelLibraryDialog) -> dict[str, list[str]]:
    """Each shown row's texts, by the row's name."""
    p = dialog.proxy
    return {p.index(r, 0).data(): [p.index(r, c).data() for c in range(p.columnCount())]
            for r in range(p.rowCount())}


def row_of(dialog: ModelLibraryDialog, name: str) -> int:
    return next(r for r in range(dialog.proxy.rowCount())
                if dialog.proxy.index(r, 0).data() == name)


def test_the_library_lists_the_hub_model_and_load_loads_it(make_window, loop, qtbot,
                                                           tiny_in_hub, tiny):
    window = make_window(EngineBridge())  # the real loader: engine.loader
    bridge = window.ctx.bridge
    assert window.model_button.text().startswith("No model")
    dialog = window.choose_model()
    assert isinstance(dialog, ModelLibraryDialog) and dialog.isVisible()
    params = sum(v.size for _, v in tree_flatten(tiny.model.parameters()))
    size = sum(p.stat().st_size for p in tiny_in_hub.iterdir())
    from engine.public import format_bytes

    assert cells(dialog)[REPO] == [REPO, "llama", f"{params / 1000:.0f}K", "f32",
                                   format_bytes(size), "1K", "yes", "Hugging Face", "text"]
    assert "SmolLM2-135M-Instruct (bundled)" in cells(dialog)

    dialog.table.selectRow(row_of(dialog, REPO))
    assert dialog.source.text() == str(tiny_in_hub)
    assert str(tiny_in_hub) in dialog.detail.text() and dialog.load_button.isEnabled()
    qtbot.mouseClick(dialog.load_button, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: bridge.state == BridgeState.READY, timeout=60)
    assert bridge.source == str(tiny_in_hub)
    run_until(loop, lambda: not dialog.isVisible())  # closes once the model is ready
    assert window.ctx.settings.recent_models[0] == str(tiny_in_hub)

    # the model button names it, and opens the library
    assert window.model_button.text() == f"{REPO} ▾"
    assert window.model_button.isVisibleTo(window)
    qtbot.mouseClick(window.model_button, Qt.MouseButton.LeftButton)
    again = [d for d in window.findChildren(ModelLibraryDialog) if d.isVisible()]
    assert len(again) == 1 and again[0].source.text() == str(tiny_in_hub)
    assert again[0].recent.item(0).text() == f"{REPO} — Hugging Face cache"
    again[0].close()


def test_the_filter_and_a_model_that_does_not_load(window, loop, qtbot, tiny_in_hub, disk):
    broken = disk / "mine" / "odd-model"
    shutil.copytree(tiny_in_hub, broken, symlinks=False)
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps(config | {"model_type": "no_such_arch"}))
    dialog = window.choose_model()
    assert "odd-model" not in cells(dialog)
    dialog.add_folder(str(disk / "mine"))  # Add folder…'s file dialog picked it
    assert window.ctx.settings.model_folders == [str(disk / "mine")]
    assert cells(dialog)["odd-model"][6] == "no"
    qtbot.keyClicks(dialog.filter, "ODD")
    assert list(cells(dialog)) == ["odd-model"]
    dialog.table.selectRow(0)
    assert not dialog.load_button.isEnabled()
    assert "no model for model_type 'no_such_arch'" in dialog.detail.text()
    assert dialog.detail.property("failed") == "true"
    tip = dialog.proxy.index(0, 0).data(Qt.ItemDataRole.ToolTipRole)
    assert str(broken) in tip and "no_such_arch" in tip
    dialog.filter.clear()
    assert len(cells(dialog)) == 3
    dialog.table.selectRow(row_of(dialog, REPO))
    assert dialog.load_button.isEnabled()
    # right-click on a model of an added folder: stop listing that folder
    rect = dialog.table.visualRect(dialog.proxy.index(row_of(dialog, "odd-model"), 0))
    assert dialog._row_menu(rect.center()) is not None
    assert dialog._row_menu(dialog.table.visualRect(
        dialog.proxy.index(row_of(dialog, REPO), 0)).center()) is None  # not an added one
    menu = dialog._row_menu(rect.center())
    [stop] = menu.actions()
    assert stop.text() == f"Stop listing {disk / 'mine'}"
    menu.close()
    stop.trigger()
    assert "odd-model" not in cells(dialog) and window.ctx.settings.model_folders == []
    assert broken.is_dir()  # its files stay
    dialog.close()


def test_download_by_repo_id_with_progress_cancel_and_resume(make_window, loop, qtbot, disk,
                                                             tiny, monkeypatch):
    hub = HubStandIn.from_dir(REPO, save_tiny_dir(tiny, disk / "src"))
    loop.run_until_complete(hub.start())
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    hub.piece_delay = 0.01  # slow enough to press Cancel mid-file
    try:
        window = make_window(EngineBridge())
        dialog = window.choose_model()
        assert REPO not in cells(dialog)
        qtbot.keyClicks(dialog.repo, REPO)
        bars: list[int] = []
        dialog.download.progress.connect(lambda p: bars.append(dialog.download_bar.value()))

        def cancel_mid_file(p) -> None:
            if p.file == "model.safetensors" and not dialog.download.cancel_event.is_set():
                qtbot.mouseClick(dialog.cancel_download_button, Qt.MouseButton.LeftButton)

        dialog.download.progress.connect(cancel_mid_file)
        qtbot.mouseClick(dialog.download_button, Qt.MouseButton.LeftButton)
        assert dialog.download_bar.isVisibleTo(dialog)
        assert dialog.cancel_download_button.isVisibleTo(dialog)
        run_until(loop, lambda: not dialog.download.running
                  and dialog.download_button.isEnabled(), timeout=30)
        assert "cancelled" in dialog.download_status.text()
        assert not dialog.download_bar.isVisibleTo(dialog)
        assert cells(dialog)[REPO][6] == "no"  # listed as the partial download it is
        weights = hub.files["model.safetensors"]
        blobs = disk / "hub" / "models--test-org--tiny-llama" / "blobs"
        [part] = blobs.glob("*.incomplete")
        have = part.stat().st_size
        assert 0 < have < len(weights) and max(bars) > 0

        dialog.download.progress.disconnect(cancel_mid_file)
        hub.piece_delay = 0.0
        qtbot.mouseClick(dialog.download_button, Qt.MouseButton.LeftButton)
        run_until(loop, lambda: dialog.download_status.text().startswith("Downloaded"),
                  timeout=30)
        assert hub.ranges == [f"bytes={have}-"]  # resumed where it stopped, not restarted
        assert not part.exists() and dialog.download_bar.value() == 1000
        snapshot = disk / "hub" / "models--test-org--tiny-llama" / "snapshots" / COMMIT
        assert cells(dialog)[REPO][6] == "yes" and dialog.source.text() == str(snapshot)
        qtbot.mouseClick(dialog.load_button, Qt.MouseButton.LeftButton)
        run_until(loop, lambda: window.ctx.bridge.state == BridgeState.READY, timeout=60)
        assert window.ctx.bridge.source == str(snapshot)
    finally:
        loop.run_until_complete(hub.stop())


def test_an_unreachable_hub_says_so_in_the_dialog(window, loop, qtbot, disk, monkeypatch):
    from tests.app.test_model_pull import free_port

    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    dialog = window.choose_model()
    before = cells(dialog)
    qtbot.keyClicks(dialog.repo, REPO)
    loads = []
    dialog.chosen.connect(loads.append)
    qtbot.keyClick(dialog.repo, Qt.Key.Key_Return)  # Enter downloads; it does not press Load
    assert dialog.download.running or dialog.download_status.isVisibleTo(dialog)
    qtbot.keyClick(dialog.filter, Qt.Key.Key_Return)
    assert loads == [] and dialog.isVisible()
    run_until(loop, lambda: dialog.download_button.isEnabled(), timeout=30)
    text = dialog.download_status.text()
    assert text.startswith(f"cannot reach the Hugging Face hub at {url}")
    assert dialog.download_status.property("failed") == "true"
    assert cells(dialog) == before  # nothing half-listed
    dialog.close()
    QApplication.processEvents()


def test_the_model_button_shortens_a_long_name_in_its_middle(window, loop):
    assert window.model_button.text() == "tiny ▾"
    source = "/tmp/models/Llama-3.1-8B-Instruct-random-weights-for-load-tests.Q4_0.gguf"
    assert loop.run_until_complete(window.load_model(source)) is True
    assert window.model_button.text() == "Llama-3.1-8B-In…load-tests.Q4_0 ▾"  # the quant shows
    assert source in window.model_button.toolTip()
    window.resize(900, 600)
    run_until(loop, lambda: window.width() == 900)
    bar = window.statusBar()
    assert window.model_button.geometry().right() < bar.width() // 2  # room for the rest


def test_the_model_button_says_how_a_gguf_runs_here(make_window, loop, tmp_path):
    """A GGUF whose tensors are held wider than in the file (Q2_K: 4-bit groups of 16) says
    so where the model is named, not only in the log."""
    from gguf import GGMLQuantizationType

    from engine import Engine
    from tests.gguf_models import CASES, ArchCase, build_model, gguf_tensors, quantize, write_gguf

    base = CASES["llama"]
    case = ArchCase("llama", dict(base.config, hidden_size=256, intermediate_size=512),
                    permute_qk=True, metadata=base.metadata)
    tensors, raw = quantize(gguf_tensors(case, build_model(case)), GGMLQuantizationType.Q2_K)
    path = write_gguf(tmp_path / "tiny-Q2_K.gguf", case, tensors, raw_types=raw)
    bridge = EngineBridge(loader=lambda source: Engine.load(source))
    loop.run_until_complete(bridge.use_engine(Engine.load(str(path)), str(path)))
    try:
        window = make_window(bridge)
        tip = window.model_button.toolTip()
        assert str(path) in tip
        assert "Q2_K tensors are held as 4-bit groups of 16" in tip, tip
        assert window.model_button.text() == "tiny-Q2_K ▾"
    finally:
        loop.run_until_complete(bridge.shutdown(timeout=2.0))
