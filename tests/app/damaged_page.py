"""Damaging a real history file past its header: one page of a table overwritten."""

from __future__ import annotations

import re
from pathlib import Path

from app.storage import Message, Session, Store

PAGE_FILL = b"\xa5" * 64


def fill_history(path: Path, chats: int = 3, messages: int = 40) -> list[Session]:
    """`chats` open chats of `messages` messages, each text about 300 bytes, so the messages
    table spans many pages; each message's text starts with a unique marker MSG-nnnn-."""
    store = Store.open(path)
    sessions = []
    n = 0
    for c in range(chats):
        s = Session(title=f"SESSION-TITLE-{c}", position=c)
        store.save_session(s)
        sessions.append(s)
        for i in range(messages):
            store.save_message(Message(session_id=s.id, seq=i,
                                       role="user" if i % 2 == 0 else "assistant",
                                       content=f"MSG-{n:04d}- " + "words " * 50))
            n += 1
    store.close()  # checkpoints the WAL into the file
    for side in ("-wal", "-shm"):
        assert not path.with_name(path.name + side).exists() \
            or path.with_name(path.name + side).stat().st_size == 0
    return sessions


def damage_page_holding(path: Path, marker: bytes) -> set[str]:
    """Overwrite the page that holds `marker` with garbage; the MSG- markers it held."""
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    at = data.index(marker)
    start = at - at % page_size
    assert start > 0, "never the header page"
    page = bytes(data[start:start + page_size])
    lost = {m.decode() for m in re.findall(rb"MSG-\d{4}-", page)}
    data[start:start + page_size] = (PAGE_FILL * (page_size // len(PAGE_FILL) + 1))[:page_size]
    path.write_bytes(bytes(data))
    return lost
