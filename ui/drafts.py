"""Unsent drafts across a restart. Each tab's draft is kept by its chat's session id and goes
back into that tab when the history reopens it. A draft whose tab does not come back (a
new tab with no message when there is no history, an unreadable chat) is not lost: it goes
into the window's empty tab, or a new tab."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from app.settings import Settings

from .chat.chat_tab import ChatTab


def remember(settings: Settings, tabs: Sequence[ChatTab]) -> None:
    """Put the tabs' unsent text into `settings` (the caller saves)."""
    settings.drafts = {t.conversation.session_id: t.input.toPlainText()
                       for t in tabs if t.input.toPlainText().strip()}


def restore(settings: Settings, tabs: Sequence[ChatTab], new_tab: Callable[[], ChatTab]) -> None:
    """Drafts back into their tabs; the others into an empty tab without text, else a new
    tab each."""
    left = dict(settings.drafts)
    for tab in tabs:
        draft = left.pop(tab.conversation.session_id, None)
        if draft and not tab.input.toPlainText():
            tab.input.setPlainText(draft)
    free = [t for t in tabs if not t.conversation.messages and not t.input.toPlainText()]
    for draft in left.values():
        tab = free.pop(0) if free else new_tab()
        tab.input.setPlainText(draft)
