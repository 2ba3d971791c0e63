"""File dialogs open in the folder the last one ended in, also after a restart."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from app.settings import Settings
from ui import file_dialogs
from ui.simulator.panel import SimulatorPanel


def test_dialogs_start_where_the_last_one_ended(window, settings, tmp_path, monkeypatch):
    exports = tmp_path / "exports"
    exports.mkdir()
    asked: list[str] = []

    def fake_save(_parent, _title, start, _filter):
        asked.append(start)
        return str(exports / Path(start).name), _filter.split(";;")[0]

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(fake_save))
    assert Path(file_dialogs.start_path()) == Path.home()  # nothing chosen yet
    panel = window.findChild(SimulatorPanel) or SimulatorPanel(window.ctx)
    first = panel._ask_save_path("run-1")
    assert Path(asked[0]) == Path.home() / "run-1.json" and first == str(exports / "run-1.json")
    panel._ask_save_path("run-2")  # the next dialog starts where the first ended
    assert Path(asked[1]) == exports / "run-2.json"
    # kept in the settings file, so a restart starts there too
    assert json.loads(settings.path.read_text(encoding="utf-8"))["last_folder"] == str(exports)
    file_dialogs.use(Settings.load(settings.path))
    assert Path(file_dialogs.start_path("x.json")) == exports / "x.json"


def test_a_folder_that_is_gone_falls_back_to_home(settings, tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    file_dialogs.use(settings)
    file_dialogs.remember(str(gone / "a.json"))
    assert Path(file_dialogs.start_path()) == gone
    gone.rmdir()
    assert Path(file_dialogs.start_path()) == Path.home()
    file_dialogs.remember("")  # a cancelled dialog changes nothing
    assert settings.last_folder == str(gone)
