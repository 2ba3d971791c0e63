"""Unloading one of the models loaded beside the default one (issue #50), from the status
bar's Unload menu. With replies running on it the window asks first, as the API's unload
does: let them finish then unload, stop them and unload, or cancel. Replies on the other
models never wait. What each answer does is app/bridge/tab_models.py's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication, QWidget

from app.bridge import EngineBridge
from app.bridge.switch import Choice, Running

from .finish_or_stop import FinishOrStopQuestion, them_they


class UnloadQuestion(FinishOrStopQuestion):
    """Unload `model` while replies run on it?"""

    def __init__(self, model: str, running: Running, titles: Mapping[str, str],
                 parent: QWidget | None = None) -> None:
        them, they = them_they(running)
        super().__init__(
            object_name="unloadQuestion", title="BatchChat: unload model",
            question=f"Unload {model}?",
            explanation=(
                f"{running.describe(titles)}\n\n"
                f"Let {them} finish: {model} writes {them} to the end, then it is unloaded.\n\n"
                f"Stop {them}: {they} now; the text so far stays in the chat.\n\n"
                "Replies on the other models go on either way."),
            finish=f"Let {them} finish, then unload", stop=f"Stop {them} and unload",
            parent=parent)


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
