"""Unsent drafts across a restart. Each tab's draft is kept by its chat's session id and goes
back into that tab when the history reopens it. A draft whose tab does not come back (a
new tab with no message when there is no history, an unreadable chat) is not lost: it goes
into the window's empty tab, or a new tab.

The tab in front comes back in front, also when it was a brand-new tab whose draft went into
another tab. Drafts (and which tab is in front) are written to the settings a moment after
typing stops (DraftSaver), not only at a clean quit: an app that is killed or crashes loses
at most the last second of typing."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, QTimer

from app.settings import Settings

from .chat.chat_tab import ChatTab

SAVE_DELAY_MS = 1000  # after the last keystroke (or a closed tab)


def remember(settings: Settings, tabs: Sequence[ChatTab]) -> None:
    """Put the tabs' unsent text into `settings` (the caller saves)."""
    settings.drafts = {t.conversation.session_id: t.input.toPlainText()
                       for t in tabs if t.input.toPlainText().strip()}


def restore(settings: Settings, tabs: Sequence[ChatTab],
            new_tab: Callable[[], ChatTab]) -> dict[str, ChatTab]:
    """Drafts back into their tabs; the others into an empty tab without text, else a new
    tab each. Returns where each went, by the session id it was saved under."""
    left = dict(settings.drafts)
    placed: dict[str, ChatTab] = {}
    for tab in tabs:
        draft = left.pop(tab.conversation.session_id, None)
        if draft and not tab.input.toPlainText():
            tab.input.setPlainText(draft)
            placed[tab.conversation.session_id] = tab
    free = [t for t in tabs if not t.conversation.messages and not t.input.toPlainText()]
    for session_id, draft in left.items():
        tab = free.pop(0) if free else new_tab()
        tab.input.setPlainText(draft)
        placed[session_id] = tab
    return placed


def front_tab(settings: Settings, tabs: Sequence[ChatTab],
              placed: dict[str, ChatTab]) -> ChatTab | None:
    """The tab that was in front (`settings.front_chat`): its chat's tab, or the tab its
    draft went into when the chat itself did not come back; None if neither is here."""
    wanted = settings.front_chat
    if not wanted:
        return None
    return next((t for t in tabs if t.conversation.session_id == wanted), placed.get(wanted))


class DraftSaver(QObject):
    """Keeps `settings.drafts` and `settings.front_chat` on disk while the app runs: `watch`
    each tab, call `changed` when a tab goes away or another comes to the front; they are
    saved SAVE_DELAY_MS after the last change (the settings file is written only when they
    differ from what was last written). `stop` before the tabs are torn down."""

    def __init__(self, settings: Settings, tabs: Callable[[], Sequence[ChatTab]],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.tabs = tabs
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(SAVE_DELAY_MS)
        self.timer.timeout.connect(self.save_now)
        self._written = self._state()

    def watch(self, tab: ChatTab) -> None:
        tab.input.textChanged.connect(self.changed)

    def changed(self) -> None:
        self.timer.start()  # restarts: one write when the typing pauses

    def save_now(self) -> None:
        remember(self.settings, self.tabs())
        state = self._state()
        if state != self._written:
            self.settings.save()
            self._written = state

    def _state(self) -> tuple[dict[str, str], str]:
        return dict(self.settings.drafts), self.settings.front_chat

    def stop(self) -> None:
        self.timer.stop()
