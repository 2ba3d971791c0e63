"""A chat closed and brought back with Reopen keeps its ×N (issue #46, found in the window:
without a history file the workspace made the fresh Conversation with ×1)."""

from __future__ import annotations

from pathlib import Path

from app.bridge import EngineBridge
from app.conversation import ChatMessage
from app.settings import Settings
from app.workspace import Workspace


def test_reopen_keeps_the_tabs_answers_choice(tmp_path: Path) -> None:
    ws = Workspace(EngineBridge(), Settings(tmp_path / "settings.json"))
    conv = ws.open()
    conv.messages.append(ChatMessage("user", "hi"))
    conv.set_answers(3)
    ws.close(conv)
    back = ws.reopen()
    assert back is not None and back is not conv
    assert back.answers == 3
