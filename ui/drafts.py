"""Unsent drafts across a restart: a tab with messages gets its draft back by session id
(the history reopens the tab); a new tab with no message yet is not in the history, so its
draft is kept apart (`Settings.new_tab_drafts`) and reopens as a new tab."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from app.settings import Settings

from .chat.chat_tab import ChatTab


def remember(settings: Settings, tabs: Sequence[ChatTab]) -> None:
    """Put the tabs' unsent text into `settings` (the caller saves)."""
    settings.drafts = {t.conversation.session_id: t.input.toPlainText()
                       for t in tabs if t.conversation.messages and t.input.toPlainText().strip()}
    settings.new_tab_drafts = [t.input.toPlainText() for t in tabs
                               if not t.conversation.messages and t.input.toPlainText().strip()]


def restore(settings: Settings, tabs: Sequence[ChatTab], new_tab: Callable[[], ChatTab]) -> None:
    """Drafts back into the tabs reopened from the history; each new-tab draft into an empty
    tab without text (the one a fresh window opens), else into a new tab."""
    for tab in tabs:
        draft = settings.drafts.get(tab.conversation.session_id)
        if draft and not tab.input.toPlainText():
            tab.input.setPlainText(draft)
    free = [t for t in tabs if not t.conversation.messages and not t.input.toPlainText()]
    for draft in settings.new_tab_drafts:
        tab = free.pop(0) if free else new_tab()
        tab.input.setPlainText(draft)
