"""The question asked before replies running on a model are cut short by a model switch or
an unload: let them finish, stop them, or cancel. The box is one; the words are the
caller's (ui/model_switch.py, ui/model_unload.py)."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QLabel, QMessageBox, QWidget

from app.bridge.switch import Choice, Running


def them_they(running: Running) -> tuple[str, str]:
    """('it', 'it ends') for one reply, ('them', 'they end') for several."""
    return ("it", "it ends") if running.total == 1 else ("them", "they end")


class FinishOrStopQuestion(QMessageBox):
    """Non-blocking (never exec(): the app runs inside qasync's loop): `answer` is a future
    that gets FINISH, STOP, or None for Cancel (also Esc or closing the box)."""

    def __init__(self, *, object_name: str, title: str, question: str, explanation: str,
                 finish: str, stop: str, parent: QWidget | None = None) -> None:
        super().__init__(QMessageBox.Icon.Question, title, question,
                         QMessageBox.StandardButton.NoButton, parent)
        self.setObjectName(object_name)
        self.setTextFormat(Qt.TextFormat.PlainText)  # a title, path or name is never markup
        label = self.findChild(QLabel, "qt_msgbox_label")
        if label is not None:  # the question stands out from the explanation
            label.setStyleSheet("font-weight: bold")  # the app's sheet sets fonts
        self.setInformativeText(explanation)
        self.buttons = {
            Choice.FINISH: self.addButton(finish, QMessageBox.ButtonRole.AcceptRole),
            Choice.STOP: self.addButton(stop, QMessageBox.ButtonRole.DestructiveRole),
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
