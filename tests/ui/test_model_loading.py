"""Issue #18 items 4 and 8: load progress in the banner and the model picker, a window that
keeps running while a model loads, a failed load that leaves the model in use serving (its
chats intact), and recent models remembered across restarts."""

from __future__ import annotations

import threading
import time

import pytest
from PySide6.QtCore import Qt

from app.bridge import BridgeState, EngineBridge
from app.settings import Settings
from tests.ui.conftest import run_until, spin


class SteppedLoader:
    """A loader that reports progress and then waits for the test to let it go on."""

    def __init__(self, make_engine) -> None:
        self.make_engine = make_engine
        self.go = threading.Event()
        self.reported = threading.Event()

    def __call__(self, source: str, progress=None):
        if source.startswith("/nope"):
            progress("reading file", 0.1)
            raise FileNotFoundError(f"{source}: no such file or directory")
        progress("reading file", 0.05)
        progress("converting layers", 0.42)
        self.reported.set()
        assert self.go.wait(10)
        progress("starting the engine", 1.0)
        return self.make_engine()


def test_load_progress_is_shown_and_the_window_keeps_running(make_window, make_engine, loop):
    loader = SteppedLoader(make_engine)
    window = make_window(EngineBridge(loader=loader))
    task = window.load_model("some-model")
    run_until(loop, lambda: loader.reported.is_set()
              and window.banner.bar.maximum() > 0 and window.banner.bar.value() == 420)
    banner = window.banner
    assert banner.isVisibleTo(window) and banner.bar.isVisibleTo(window)
    assert "converting layers" in banner.label.text() and "some-model" in banner.label.text()
    ticks = []  # the UI thread runs timers while the loader thread works
    start = time.perf_counter()
    while time.perf_counter() - start < 0.3:
        spin(loop, 0.02)
        ticks.append(time.perf_counter())
    assert len(ticks) >= 5
    window.current_tab().input.setPlainText("typing while it loads")  # the window responds
    loader.go.set()
    assert loop.run_until_complete(task) is True
    assert window.ctx.bridge.state == BridgeState.READY
    assert not banner.isVisibleTo(window)


def test_the_picker_follows_the_load_and_closes_when_ready(make_window, make_engine, loop):
    loader = SteppedLoader(make_engine)
    window = make_window(EngineBridge(loader=loader))
    dialog = window.choose_model()
    dialog.source.setText("picked-model")
    dialog.accept()
    run_until(loop, lambda: dialog.bar.value() == 420)
    assert dialog.isVisible() and dialog.progress_box.isVisibleTo(dialog)
    assert "converting layers" in dialog.stage.text()
    assert not dialog.load_button.isEnabled()  # one load at a time
    loader.go.set()
    run_until(loop, lambda: window.ctx.bridge.is_ready)
    assert not dialog.isVisible()
    assert window.ctx.settings.model == "picked-model"


def test_a_failed_load_keeps_the_previous_model_and_its_chats(window, loop, qtbot):
    bridge = window.ctx.bridge
    bridge.loader = SteppedLoader(lambda: pytest.fail("no engine should be built"))
    engine = bridge.local.engine
    tab = window.current_tab()
    assert tab.send_text("hello")
    run_until(loop, lambda: not tab.conversation.is_busy)
    before = [(m.role, m.content) for m in tab.conversation.messages]

    dialog = window.choose_model()
    dialog.source.setText("/nope/broken.gguf")
    dialog.accept()
    run_until(loop, lambda: bool(bridge.load_error))
    assert bridge.state == BridgeState.READY and bridge.local.engine is engine and engine.running
    assert dialog.isVisible() and dialog.error.isVisibleTo(dialog)
    assert "no such file" in dialog.error.text() and "keeps serving" in dialog.error.text()
    assert dialog.error.text().count("/nope/broken.gguf") == 1  # the path, said once
    banner = window.banner
    assert banner.isVisibleTo(window) and banner.property("failed") == "true"
    assert "no such file" in banner.label.text() and "Still using" in banner.label.text()
    assert window.ctx.settings.model != "/nope/broken.gguf"
    assert "/nope/broken.gguf" not in window.ctx.settings.recent_models
    # the chat is as it was and goes on with the same model
    assert [(m.role, m.content) for m in tab.conversation.messages] == before
    assert tab.send_text("still there?")
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert tab.conversation.messages[-1].finish_reason == "length"
    banner.dismiss.click()
    assert not banner.isVisibleTo(window)
    dialog.close()


def test_chats_go_on_while_another_model_loads(window, loop):
    bridge = window.ctx.bridge
    loader = SteppedLoader(lambda: pytest.fail("not reached"))
    bridge.loader = loader
    task = window.load_model("big-model")
    run_until(loop, lambda: loader.reported.is_set())
    assert bridge.state == BridgeState.LOADING
    tab = window.current_tab()
    assert tab.send_text("answer while loading")  # the loaded model still serves
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert tab.conversation.messages[-1].content
    loader.make_engine = lambda: (_ for _ in ()).throw(RuntimeError("out of memory"))
    loader.go.set()
    assert loop.run_until_complete(task) is False
    assert bridge.is_ready and "out of memory" in bridge.load_error


def test_recent_models_are_listed_remembered_and_loadable(make_window, make_engine, settings,
                                                          loop, tmp_path):
    model_dir = tmp_path / "models" / "my-llama"
    model_dir.mkdir(parents=True)
    window = make_window(EngineBridge(loader=lambda source: make_engine()))
    for source in ("bundled", str(model_dir), "org/repo", "bundled"):
        assert loop.run_until_complete(window.load_model(source)) is True
    assert settings.recent_models == ["bundled", "org/repo", str(model_dir)]
    assert Settings.load(settings.path).recent_models == settings.recent_models  # persisted

    dialog = window.choose_model()
    items = [dialog.recent.item(i) for i in range(dialog.recent.count())]
    assert [i.data(Qt.ItemDataRole.UserRole) for i in items] == settings.recent_models
    assert items[2].text() == f"my-llama — {model_dir.parent}"
    dialog.recent.setCurrentRow(1)
    assert dialog.source.text() == "org/repo"
    dialog.recent.itemActivated.emit(items[2])  # double-click / Enter loads it
    run_until(loop, lambda: window.ctx.bridge.source == str(model_dir)
              and window.ctx.bridge.is_ready)
    run_until(loop, lambda: not dialog.isVisible())
    assert settings.recent_models[0] == str(model_dir)


def test_recent_models_are_capped_and_survive_a_bad_settings_file(tmp_path):
    s = Settings(tmp_path / "s.json")
    for i in range(12):
        s.remember_model(f"model-{i}")
    assert s.recent_models == [f"model-{i}" for i in range(11, 3, -1)]
    (tmp_path / "s.json").write_text('{"recent_models": ["a", 3, "", null, "b"]}')
    assert Settings.load(tmp_path / "s.json").recent_models == ["a", "b"]


def test_the_picker_browses_for_a_gguf_file_or_a_directory(window, loop, tmp_path):
    dialog = window.choose_model()
    file_dialog = dialog._browse_file()
    assert "*.gguf" in ";".join(file_dialog.nameFilters())
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    file_dialog.fileSelected.emit(str(gguf))
    assert dialog.source.text() == str(gguf)
    assert window.ctx.settings.last_folder == str(tmp_path)  # dialogs open here next time
    file_dialog.close()
    model_dir = tmp_path / "models" / "my-mlx-model"
    model_dir.mkdir(parents=True)
    dir_dialog = dialog._browse_dir()
    assert dir_dialog.fileMode() == dir_dialog.FileMode.Directory
    assert dir_dialog.directory().absolutePath() == str(tmp_path)  # where the last one ended
    dir_dialog.fileSelected.emit(str(model_dir))
    assert dialog.source.text() == str(model_dir)
    assert window.ctx.settings.last_folder == str(model_dir.parent)
    dir_dialog.close()
    dialog.close()


def test_a_picker_opened_during_a_load_shows_where_it_stands(make_window, make_engine, loop):
    loader = SteppedLoader(make_engine)
    window = make_window(EngineBridge(loader=loader))
    task = window.load_model("started-elsewhere")  # the startup load, say
    run_until(loop, lambda: window.ctx.bridge.progress == ("converting layers", 0.42))
    dialog = window.choose_model()
    assert dialog.progress_box.isVisibleTo(dialog) and dialog.bar.value() == 420
    assert dialog.stage.text() == "Loading started-elsewhere — converting layers"
    assert not dialog.load_button.isEnabled()
    loader.go.set()
    assert loop.run_until_complete(task) is True
    assert not dialog.progress_box.isVisibleTo(dialog) and dialog.load_button.isEnabled()
    dialog.close()


LONG_SOURCE = "/tmp/models/acme-research/Llama-3.1-8B-Instruct-random-weights-for-load-tests"


def test_at_900_px_the_banner_names_the_model_and_the_status_bar_elides_it(
        make_window, make_engine, loop):
    """Seen under Xvfb: a long path wrapped the banner over two lines, and the status bar
    cut the model's name off mid-word at the window's edge."""
    loader = SteppedLoader(make_engine)
    window = make_window(EngineBridge(loader=loader))
    window.resize(900, 600)
    task = window.load_model(LONG_SOURCE)
    run_until(loop, lambda: window.banner.bar.value() == 420)
    text = window.banner.label.text()
    assert text.startswith("Loading Llama-3.1-8B-Instruct-random-weights-for-load-tests — "
                           "converting layers · ")
    assert "/tmp/models" not in text and window.banner.label.toolTip() == LONG_SOURCE
    loader.go.set()
    assert loop.run_until_complete(task) is True
    window.engine_status.show_state(
        BridgeState.READY, "Llama-3.1-8B-Instruct-random-weights-for-load-tests "
        "(mlx-lm), float32 on cpu")
    window.engine_status.show_stats()  # "0 generating · 0 queued · …" beside it
    spin(loop, 0.05)
    label, stats = window.engine_status.model_label, window.engine_status.stats_label
    shown = label.text()
    assert "…" in shown and shown.startswith("Model: Llama") and shown.endswith("on cpu")
    assert label.fontMetrics().horizontalAdvance(shown) <= label.width()
    assert label.toolTip() == label.full_text()
    assert stats.width() >= stats.sizeHint().width()  # the engine's numbers stay whole
    window.resize(1600, 780)  # room again: the whole name
    spin(loop, 0.05)
    assert label.text() == label.full_text() and not label.toolTip()


def test_a_long_recent_model_is_elided_in_the_picker_not_scrolled(window, settings, loop):
    deep = ("/home/someone/.cache/huggingface/hub/models--acme-research--Llama-3.1-8B/"
            "snapshots/0123456789abcdef0123456789abcdef/Llama-3.1-8B-Instruct-4bit")
    settings.recent_models = [deep, "bundled"]
    dialog = window.choose_model()
    spin(loop, 0.05)
    view = dialog.recent
    item = view.item(0)
    assert item.toolTip() == deep
    assert view.horizontalScrollBar().maximum() == 0
    assert view.visualItemRect(item).right() <= view.viewport().width()
    dialog.close()
