"""Writes unsent drafts and the chat in front to the settings a moment after typing stops.

The drafts themselves are the Workspace's (app/workspace.py: where each goes back after a
restart); this only times the writes, not only at a clean quit, so an app that is killed
or crashes loses at most the last second of typing.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer

from app.workspace import Workspace

SAVE_DELAY_MS = 1000  # after the last keystroke (or a closed tab, or another tab in front)


class DraftSaver(QObject):
    """Call `changed` on each change; the settings file is written SAVE_DELAY_MS after the
    last one, and only when the drafts or the front chat differ from what was last written.
    `stop` before the tabs are torn down."""

    def __init__(self, workspace: Workspace, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.workspace = workspace
        self.settings = workspace.settings
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(SAVE_DELAY_MS)
        self.timer.timeout.connect(self.save_now)
        self._written = self._state()

    def changed(self, *_args: object) -> None:
        self.timer.start()  # restarts: one write when the typing pauses

    def save_now(self) -> None:
        self.workspace.remember()
        state = self._state()
        if state != self._written:
            self.settings.save()
            self._written = state

    def _state(self) -> tuple[dict[str, str], str]:
        return dict(self.settings.drafts), self.settings.front_chat

    def stop(self) -> None:
        self.timer.stop()
