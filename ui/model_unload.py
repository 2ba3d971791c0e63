"""Unloading one of the models loaded beside the default one (issue #50), from the status
bar's Unload menu. With replies running on it the window asks first, as the API's unload
does: let them finish then unload, stop them and unload, or cancel. Replies on the other
models never wait. What each answer does is app/bridge/tab_models.py's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QMessageBox, QWidget

from app.bridge import EngineBridge
from app.bridge.switch import Choice, Running


class UnloadQuestion(QMessageBox):
    """Non-blocking (the app runs inside qasync's loop): `answer` is a future that gets
    FINISH, STOP, or None for Cancel (also Esc or closing the box)."""

    def __init__(self, model: str, running: Running, titles: Mapping[str, str],
                 parent: QWidget | None = None) -> None:
        super().__init__(QMessageBox.Icon.Question, "BatchChat: unload model",
                         f"Unload {model}?", QMessageBox.StandardButton.NoButton, parent)
        self.setObjectName("unloadQuestion")
        self.setTextFormat(Qt.TextFormat.PlainText)  # a model's name is never markup
        question = self.findChild(QLabel, "qt_msgbox_label")
        if question is not None:  # the question stands out, as the switch question's does
            question.setStyleSheet("font-weight: bold")
        them, they = ("it", "it ends") if running.total == 1 else ("them", "they end")
        self.setInformativeText(
            f"{running.describe(titles)}\n\n"
            f"Let {them} finish: {model} writes {them} to the end, then it is unloaded.\n\n"
            f"Stop {them}: {they} now; the text so far stays in the chat.\n\n"
            "Replies on the other models go on either way.")
        self.buttons = {
            Choice.FINISH: self.addButton(f"Let {them} finish, then unload",
                                          QMessageBox.ButtonRole.AcceptRole),
            Choice.STOP: self.addButton(f"Stop {them} and unload",
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


class ModelUnloader(QObject):
    """`unload(name)` asks when replies run on the model, then unloads it; `question` is
    the open question (None when none is)."""

    def __init__(self, window: QWidget, bridge: EngineBridge,
                 titles: Callable[[], Mapping[str, str]] = dict) -> None:
        super().__init__(window)
        self._window = window
        self._bridge = bridge
        self._titles = titles
        self.question: UnloadQuestion | None = None
        self._tasks: set[asyncio.Task[bool]] = set()

    def unload(self, model: str) -> asyncio.Task[bool]:
        """A task: True once `model` was unloaded; False when cancelled or not loaded."""
        task = asyncio.ensure_future(self._unload(model))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _unload(self, model: str) -> bool:
        running = self._bridge.model_running(model)
        stop = False
        if running.total:
            parent = QApplication.activeModalWidget() or self._window
            box = self.question = UnloadQuestion(model, running, self._titles(), parent)
            box.open()
            try:
                answer = await box.answer
            finally:
                self.question = None
            if answer is None:
                return False
            stop = answer is Choice.STOP
        return await self._bridge.unload_model(model, stop=stop)
