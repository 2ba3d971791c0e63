"""A history write that can never succeed (text that is not valid Unicode) is set aside
into a recovery file next to the database, once, and never blocks the writes after it
(issue #15, item 1). Real SQLite files throughout."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.conversation import Conversation
from app.history.writer import HistoryWriter
from app.request import Refusal, RefusalCode
from app.storage import Message, SafeStore, Session
from app.storage.set_aside import read, set_aside_path
from ui.history import words
from ui.refusals import notice_text

from .history_sync_helpers import FAST, read_back, start_bridge, wait_until
from .test_storage_failures_locked import hold_write_lock

BAD = "hi \ud800 there"


def test_unsavable_text_is_set_aside_and_later_writes_go_on(db_file: Path) -> None:
    safe = SafeStore.open(db_file)
    session = Session(title="chat")
    assert safe.save_session(session)
    bad = Message(session_id=session.id, seq=0, role="user", content=BAD)
    safe.save_message(bad)
    assert safe.pending_count == 0
    assert safe.last_error is not None and safe.last_error.kind == "invalid"
    assert "lone surrogate" in str(safe.last_error) and "U+D800" in str(safe.last_error)
    good = Message(session_id=session.id, seq=1, role="user", content="fine")
    assert safe.save_message(good)
    assert [m.content for m in safe.reader.list_messages(session.id)] == ["fine"]
    path = set_aside_path(db_file)
    assert safe.set_aside_path == path and path.parent == db_file.parent
    path.read_bytes().decode("ascii")  # surrogates escaped: the file is plain ASCII
    [entry] = read(path)
    assert entry["write"] == "save_message" and "lone surrogate" in entry["reason"]
    assert entry["args"][0]["id"] == bad.id and entry["args"][0]["content"] == BAD
    assert safe.close()


def test_unsavable_write_queued_behind_a_lock_does_not_block_the_rest(db_file: Path) -> None:
    safe = SafeStore.open(db_file, busy_timeout_s=0.1)
    session = Session(title="chat")
    safe.save_session(session)
    other = hold_write_lock(db_file)
    try:
        before = Message(session_id=session.id, seq=0, role="user", content="before")
        safe.save_message(before)
        safe.save_message(Message(session_id=session.id, seq=1, role="user", content=BAD))
        after = Message(session_id=session.id, seq=2, role="user", content="after")
        safe.save_message(after)
        assert safe.pending_count == 3 and not safe.retry_pending()
    finally:
        other.rollback()
        other.close()
    assert safe.retry_pending()  # the timer's retry
    assert [m.content for m in safe.reader.list_messages(session.id)] == ["before", "after"]
    assert len(safe.rejected) == 1 and len(read(set_aside_path(db_file))) == 1
    assert safe.close()


async def test_a_chat_refuses_such_text_and_its_history_keeps_saving(tmp_path: Path) -> None:
    bridge = await start_bridge()
    try:
        db = tmp_path / "h.db"
        sync = HistoryWriter.open(db, meta_delay_s=0.0)
        conv = Conversation(bridge, title="t", params=FAST)
        notes: list[Refusal] = []
        conv.notice.connect(notes.append)
        sync.attach(conv, 0)
        assert not conv.send(BAD)
        assert conv.messages == [] and not conv.is_busy
        assert len(notes) == 1 and notes[0].code == RefusalCode.BAD_CHARACTER
        assert "lone surrogate (U+D800 at character 3)" in (notice_text(notes[0]) or "")
        assert conv.send("hello")
        await wait_until(lambda: not conv.is_busy)
        conv.rename("bad \udfff title")  # repaired, never refused: the session still saves
        sync.flush()
        session, rows = read_back(db, conv.session_id)
        assert session.title == "bad \ufffd title"
        assert [m.content for m in rows] == ["hello", conv.messages[1].content]
        assert sync.pending_count == 0 and sync.set_aside_count == 0
        assert sync.close()
    finally:
        await bridge.shutdown(timeout=2.0)


def test_history_sync_words_what_was_set_aside(db_file: Path) -> None:
    store = SafeStore.open(db_file)  # the test writes as the writer would
    sync = HistoryWriter.over(store)
    store.save_session(Session(title=BAD))
    assert sync.set_aside_count == 1
    text = words.set_aside_text(sync.status())
    assert "1 change to the history could not be saved and was set aside" in text
    assert str(set_aside_path(db_file)) in text and "U+D800" in text
    assert sync.close()


TEXTS = ["one", "two", "three"]


@pytest.fixture
def queued(db_file: Path) -> Iterator[HistoryWriter]:
    """A history with three messages queued behind another program's write lock."""
    store = SafeStore.open(db_file, busy_timeout_s=0.05)  # the test writes as the writer would
    sync = HistoryWriter(store)
    session = Session(title="chat")
    assert store.save_session(session)
    other = hold_write_lock(db_file)
    try:
        for seq, text in enumerate(TEXTS):
            store.save_message(Message(session_id=session.id, seq=seq, role="user",
                                            content=text))
        assert sync.pending_count == 3
        yield sync
    finally:
        other.rollback()
        other.close()


def test_quit_with_no_one_to_ask_sets_the_queue_aside_in_order(queued: HistoryWriter,
                                                               db_file: Path) -> None:
    assert not queued.close(set_aside=True)  # not in the database, but not lost either
    assert queued.pending_count == 0
    entries = read(set_aside_path(db_file))
    assert [e["args"][0]["content"] for e in entries] == TEXTS
    assert all(e["write"] == "save_message" and "told to quit" in e["reason"]
               and "locked" in e["reason"] for e in entries)


def test_quit_with_no_one_to_ask_falls_back_to_the_data_directory(
        queued: HistoryWriter, db_file: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("BATCHCHAT_DATA_DIR", str(elsewhere))
    set_aside_path(db_file).mkdir()  # the usual file cannot be written
    assert not queued.close(set_aside=True)
    entries = read(elsewhere / "history.db.set-aside.jsonl")
    assert [e["args"][0]["content"] for e in entries] == TEXTS


def test_a_plain_close_leaves_the_queue_alone(queued: HistoryWriter, db_file: Path) -> None:
    assert not queued.close()  # Quit anyway: the user chose to drop them
    assert queued.pending_count == 3 and not set_aside_path(db_file).exists()
