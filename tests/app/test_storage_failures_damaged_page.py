"""A history file damaged past its header (one page of a table overwritten): found at
start by PRAGMA quick_check, moved aside untouched, and every row that can still be read
carried into a fresh file, with a notice saying what was recovered (issue #15, item 2)."""

from __future__ import annotations

import re
from pathlib import Path

from app.storage import SafeStore, Store

from .damaged_page import damage_page_holding, fill_history


def markers(store: Store) -> set[str]:
    found = set()
    for s in store.list_sessions():
        for m in store.load_session(s.id).messages:
            found.update(re.findall(r"MSG-\d{4}-", m.content))
    return found


def test_a_damaged_messages_page_is_set_aside_and_the_rest_recovered(db_file: Path) -> None:
    db_file.parent.mkdir(parents=True)
    sessions = fill_history(db_file)
    lost = damage_page_holding(db_file, b"MSG-0057-")
    assert lost and len(lost) < 20
    damaged = db_file.read_bytes()

    store = Store.open(db_file)
    try:
        [aside] = db_file.parent.glob("history.db.corrupt-*Z")  # (not its -wal, -shm)
        assert aside.read_bytes() == damaged  # kept as it was, never deleted
        notice = store.notice or ""
        assert "damaged" in notice and str(aside) in notice
        assert f"Recovered 3 chats, {120 - len(lost)} messages." in notice
        assert f"Could not read {len(lost)} messages." in notice
        assert [s.id for s in store.list_sessions(open_only=True)] == [s.id for s in sessions]
        assert markers(store) == {f"MSG-{n:04d}-" for n in range(120)} - lost
        kept = sorted({f"MSG-{n:04d}-" for n in range(120)} - lost)[-1]
        assert store.search(kept.split("-")[1])  # the search index was rebuilt by triggers
        assert store.db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    finally:
        store.close()
    again = Store.open(db_file)  # the new file is sound: nothing more is set aside
    assert again.notice is None and len(list(db_file.parent.glob("*.corrupt-*Z"))) == 1
    again.close()


def test_messages_whose_chat_row_was_lost_are_kept_under_a_placeholder(db_file: Path) -> None:
    db_file.parent.mkdir(parents=True)
    fill_history(db_file)
    damage_page_holding(db_file, b"SESSION-TITLE-1")  # the one page of the sessions table
    store = Store.open(db_file)
    try:
        assert "Recovered 120 messages." in (store.notice or "")
        assert "Could not read 3 chats." in (store.notice or "")
        titles = [s.title for s in store.list_sessions()]
        assert titles == ["Recovered messages"] * 3
        assert len(markers(store)) == 120
    finally:
        store.close()


def test_safe_store_tells_the_user(db_file: Path) -> None:
    db_file.parent.mkdir(parents=True)
    fill_history(db_file)
    damage_page_holding(db_file, b"MSG-0090-")
    safe = SafeStore.open(db_file)
    assert safe.notice is not None and "Recovered 3 chats" in safe.notice
    assert safe.pending_count == 0
    safe.close()
