"""The question before a model switch while replies run: let them finish, stop them, or cancel.

Only the question lives here; what each answer does is app/bridge/switch.py's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QMessageBox, QWidget

from app.bridge.switch import Choice, Running, model_name


class SwitchQuestion(QMessageBox):
    """Non-blocking (never exec(): the app runs inside qasync's loop): `answer` is a future
    that gets the Choice, or None for Cancel (also Esc or closing the box)."""

    def __init__(self, source: str, running: Running, titles: Mapping[str, str],
                 parent: QWidget | None = None) -> None:
        name = model_name(source)
        super().__init__(QMessageBox.Icon.Question, "BatchChat: switch model",
                         f"Switch to {name}?", QMessageBox.StandardButton.NoButton, parent)
        self.setObjectName("switchQuestion")
        self.setTextFormat(Qt.TextFormat.PlainText)  # a title or path is never markup
        question = self.findChild(QLabel, "qt_msgbox_label")
        if question is not None:  # the question stands out from the explanation
            question.setStyleSheet("font-weight: bold")  # the app's sheet sets fonts
        n = running.total
        them, they = ("it", "it ends") if n == 1 else ("them", "they end")
        self.setInformativeText(
            f"{running.describe(titles)}\n\n"
            f"Let {them} finish: the model in use writes {them} to the end, then {name} "
            "loads. New messages can be sent once it has loaded.\n\n"
            f"Stop {them}: {they} now; the text so far stays in the chat.")
        self.buttons = {
            Choice.FINISH: self.addButton(f"Let {them} finish, then switch",
                                          QMessageBox.ButtonRole.AcceptRole),
            Choice.STOP: self.addButton(f"Stop {them} and switch",
                                        QMessageBox.ButtonRole.DestructiveRole),
            None: self.addButton("Cancel", QMessageBox.ButtonRole.RejectRole),
        }
        self.setDefaultButton(self.buttons[Choice.FINISH])  # type: ignore[arg-type]
        self.setEscapeButton(self.buttons[None])
        self.answer: asyncio.Future[Choice | None] = \
            asyncio.get_event_loop().create_future()
        self.buttonClicked.connect(self._clicked)
        self.finished.connect(lambda _result: self._settle(None))  # Esc, closed
        self.setWindowModality(Qt.WindowModality.WindowModal)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

    def _clicked(self, button: QAbstractButton) -> None:
        self._settle(next((c for c, b in self.buttons.items() if b is button), None))

    def _settle(self, choice: Choice | None) -> None:
        if not self.answer.done():
            self.answer.set_result(choice)


def ask_switch(window: QWidget, source: str, running: Running,
               titles: Mapping[str, str]) -> SwitchQuestion:
    """Open the question over whatever dialog is in front (the model picker, say)."""
    parent = QApplication.activeModalWidget() or window
    box = SwitchQuestion(source, running, titles, parent)
    box.open()
    return box
