"""The question before a model switch while replies run: let them finish, stop them, or cancel.

Only the question lives here; what each answer does is app/bridge/switch.py's.
"""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtWidgets import QApplication, QWidget

from app.bridge.switch import Running, model_name

from .finish_or_stop import FinishOrStopQuestion, them_they


class SwitchQuestion(FinishOrStopQuestion):
    """Switch to `source` while replies run on the model in use?"""

    def __init__(self, source: str, running: Running, titles: Mapping[str, str],
                 parent: QWidget | None = None) -> None:
        name = model_name(source)
        them, they = them_they(running)
        super().__init__(
            object_name="switchQuestion", title="BatchChat: switch model",
            question=f"Switch to {name}?",
            explanation=(
                f"{running.describe(titles)}\n\n"
                f"Let {them} finish: the model in use writes {them} to the end, then {name} "
                "loads. New messages can be sent once it has loaded.\n\n"
                f"Stop {them}: {they} now; the text so far stays in the chat."),
            finish=f"Let {them} finish, then switch", stop=f"Stop {them} and switch",
            parent=parent)


def ask_switch(window: QWidget, source: str, running: Running,
               titles: Mapping[str, str]) -> SwitchQuestion:
    """Open the question over whatever dialog is in front (the model picker, say)."""
    parent = QApplication.activeModalWidget() or window
    box = SwitchQuestion(source, running, titles, parent)
    box.open()
    return box
