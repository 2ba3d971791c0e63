"""Fixtures for the storage tests: a fresh real SQLite file per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.storage import Message, Session, Store


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    return tmp_path / "data" / "history.db"


@pytest.fixture
def store(db_file: Path) -> Iterator[Store]:
    s = Store.open(db_file, busy_timeout_s=0.2)
    yield s
    s.close()


def add_chat(
    store: Store, title: str = "Chat", texts: tuple[str, ...] = ("hi", "hello")
) -> Session:
    """A session with alternating user/assistant messages."""
    session = Session(title=title, system_prompt="Be brief.",
                      params={"temperature": 0.7, "top_p": 0.9, "stop": ["</s>"]})
    store.save_session(session)
    for seq, text in enumerate(texts):
        role = "user" if seq % 2 == 0 else "assistant"
        stats = {"generated_tokens": 5, "tokens_per_s": 41.5} if role == "assistant" else None
        store.save_message(Message(session_id=session.id, seq=seq, role=role, content=text,
                                   params={"max_tokens": 64}, stats=stats))
    return session
