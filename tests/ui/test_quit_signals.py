"""SIGTERM and SIGHUP (logout, shutdown, `kill PID`) quit a real app process the way Quit
does: the window's size and docks are saved, a streaming reply ends "shutdown" and is
saved whole, and the process exits 0. With the history locked, nobody is asked: what
cannot be saved goes to the set-aside file next to the database."""

from __future__ import annotations

import base64
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import QWidget

from app.storage import Store
from app.storage.set_aside import read, set_aside_path
from tests.ui.app_process import AppProcess, read_messages

pytestmark = pytest.mark.skipif(sys.platform != "linux",
                                reason="POSIX signals and the offscreen platform")

SIZE = (720, 530)  # not the default: only a clean quit writes it to settings.json
AUTOSEND = [["first question", 20], ["second question", 15000]]


def streamed_after_first(app: AppProcess) -> int:
    """How many progress lines the second reply printed so far."""
    texts = [x for _, x in app.lines]
    if "autosend finished 1" not in texts:
        return 0
    after = texts[texts.index("autosend finished 1"):]
    return sum(1 for x in after if x.startswith("autosend streamed "))


def quit_with(app: AppProcess, signum: int) -> int:
    """The app's exit status after `signum`; a quit not ended within a minute fails with
    what the app printed."""
    app.proc.send_signal(signum)
    try:
        return app.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no exit 60 s after signal {signum}; the app printed:\n{app.output()}")
    finally:
        app.finish()


def saved_size(qapp: Any, settings: dict[str, Any]) -> tuple[int, int]:
    widget = QWidget()
    try:
        geometry = base64.b64decode(settings["window_geometry"])
        assert widget.restoreGeometry(QByteArray(geometry))
        return widget.width(), widget.height()
    finally:
        widget.deleteLater()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_signal_quits_like_the_quit_menu(tmp_path: Path, qapp: Any, signum: int) -> None:
    db, data = tmp_path / "h.db", tmp_path / "data"
    # The app keeps a signal it was started with ignored (SIGHUP under nohup, as a suite run
    # in the background inherits it), so it is started here with the signal's default.
    inherited = signal.signal(signum, signal.SIG_DFL)
    try:
        app = AppProcess(db, data, AUTOSEND, BATCHCHAT_TEST_WINDOW_SIZE="{}x{}".format(*SIZE))
    finally:
        signal.signal(signum, inherited)
    try:  # the second reply is streaming, saved so far as an incomplete checkpoint
        app.wait_until(lambda: streamed_after_first(app) >= 3
                       and len(read_messages(db)) == 4, "the second reply streaming")
    except BaseException:
        app.finish()
        raise
    code = quit_with(app, signum)
    assert code == 0, app.output()
    assert "Traceback" not in app.output(), app.output()

    settings = json.loads((data / "settings.json").read_text(encoding="utf-8"))
    assert saved_size(qapp, settings) == SIZE
    assert settings["window_state"]  # the docks' layout
    store = Store.open(db, read_only=True)
    try:
        [session] = store.list_sessions(open_only=True)  # the chat stays open for next time
        messages = store.list_messages(session.id)
    finally:
        store.close()
    assert settings["front_chat"] == session.id
    assert [(m.role, m.is_complete) for m in messages] == [
        ("user", True), ("assistant", True), ("user", True), ("assistant", True)]
    reply = messages[3]  # ended by the quit, as at Quit: whole, with its stats
    assert reply.stats["finish_reason"] == "shutdown" and reply.content
    assert reply.stats["generated_tokens"] > 0


def test_sigterm_with_the_history_locked_sets_unsaved_changes_aside(tmp_path: Path) -> None:
    db, data = tmp_path / "h.db", tmp_path / "data"
    app = AppProcess(db, data, AUTOSEND)
    other = None
    try:
        app.wait_until(lambda: streamed_after_first(app) >= 1, "the second reply")
        other = sqlite3.connect(db, isolation_level=None)  # another program's write lock
        other.execute("BEGIN EXCLUSIVE")
        locked_at = len(app.lines)
        app.wait_until(lambda: sum(1 for _, x in app.lines[locked_at:]
                                   if x.startswith("autosend streamed ")) >= 15,
                       "the reply streaming under the lock")
        code = quit_with(app, signal.SIGTERM)  # would wait for an answer if it asked
    finally:
        app.finish()
        if other is not None:
            other.rollback()
            other.close()
    assert code == 0, app.output()
    assert "set aside in" in app.output(), app.output()

    entries = read(set_aside_path(db))
    assert entries and all("told to quit" in e["reason"] and "locked" in e["reason"]
                           for e in entries)
    saved = [e["args"][0] for e in entries if e["write"] == "save_message"]
    last = saved[-1]  # the reply as the quit ended it, kept whole
    assert last["role"] == "assistant" and last["is_complete"]
    assert last["stats"]["finish_reason"] == "shutdown"
    rows = read_messages(db)  # what was saved before the lock is there
    assert [(r[1], r[3]) for r in rows[:2]] == [("user", 1), ("assistant", 1)]
    if len(rows) == 4:  # the reply's first checkpoints came before the lock
        assert rows[3][3] == 0 and last["content"].startswith(rows[3][2])

    # The next start, with the lock gone, writes them back (issue #28): the reply the quit
    # ended is in the history, whole, and the start says how many messages came back.
    from app.history.writer import HistoryWriter
    from ui.history import words

    restarted = HistoryWriter.open(db)
    notice = words.notice(restarted.status()) or ""
    assert restarted.close()
    assert "that could not be saved before BatchChat last quit were restored" in notice or \
        "that could not be saved before BatchChat last quit was restored" in notice, notice
    rows = read_messages(db)
    assert rows[-1][1:4] == ("assistant", last["content"], 1)
    assert json.loads(rows[-1][4])["finish_reason"] == "shutdown"
    assert not set_aside_path(db).exists()
