"""Quitting saves the open chats' KV; after a restart a tab's next turn loads it instead of
computing its history again."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from tests.ui.conftest import HistoryApp, run_until


def send(qtbot, tab, text: str) -> None:
    qtbot.keyClicks(tab.input, text)
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)


def test_a_chat_continues_from_its_saved_kv_after_a_restart(loop, settings, make_engine,
                                                           qtbot, tmp_path):
    kv = tmp_path / "kv"
    app = HistoryApp(loop, settings, lambda **o: make_engine(kv_disk_dir=str(kv), **o), qtbot,
                     tmp_path / "h.db")
    try:
        window = app.start()
        tab = window.current_tab()
        send(qtbot, tab, "remember this")
        run_until(loop, lambda: not tab.conversation.is_busy)
        first = tab.conversation.generations[-1].stream
        app.stop()  # quit: the open tab's KV goes to disk
        assert len(list(kv.glob("*.safetensors"))) == 1

        window = app.start()  # a new engine: nothing in memory, the file on disk
        tab = window.current_tab()
        send(qtbot, tab, "what did I say?")
        run_until(loop, lambda: not tab.conversation.is_busy)
        reply = tab.conversation.messages[-1]
        assert reply.stats.cached_tokens == len(first.prompt_tokens) + len(first.tokens) - 1
        shown = [w.text() for w in tab.findChildren(QLabel, "statsLabel")]
        assert f"{reply.stats.cached_tokens} of {reply.stats.prompt_tokens} prompt tokens " \
            "cached" in shown[-1]
    finally:
        app.stop()
