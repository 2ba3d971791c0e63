"""Assertions shared by the history UI tests: read the database as another process would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.storage import Store


def stored(db: Path) -> Store:
    return Store.open(db, read_only=True)


def assert_tab_saved(db: Path, tab: Any) -> None:
    """The stored chat is exactly the tab's (its tree of messages, settings)."""
    conv = tab.conversation
    s = stored(db)
    try:
        loaded = s.load_session(conv.session_id)
    finally:
        s.close()
    assert (loaded.session.title, loaded.session.system_prompt, loaded.session.params) == (
        conv.title, conv.system_prompt, conv.params)
    # every version is stored, with its parent; the tab shows one path through them
    assert [(m.id, m.parent_id, m.role, m.content, m.is_complete)
            for m in loaded.messages] == [
        (m.id, m.parent_id, m.role, m.content,
         not m.streaming and m.finish_reason != "interrupted")  # a crash's, still stored so
        for m in conv.tree.nodes.values()]
    assert [w.message for w in tab.messages.widgets] == conv.messages
