"""Writes set aside at a quit with the disk full or the database locked come back at the next
start (issue #28): replayed into the history, the user told how many messages were
restored, the file renamed so it is not replayed again; twice is harmless, a newer row is
never overwritten, a file with lines that cannot be replayed is kept and named. Real SQLite
files; the set-aside file made by the app's own quit path."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.history.writer import HistoryWriter
from app.storage import Message, SafeStore, Session, Store
from app.storage.set_aside import read, set_aside_path
from ui.history import words

from .test_storage_failures_disk_full import fill_disk
from .test_storage_failures_locked import hold_write_lock


@contextmanager
def locked(store: SafeStore) -> Iterator[None]:
    other = hold_write_lock(store.store.path)
    try:
        yield
    finally:
        other.rollback()
        other.close()


@contextmanager
def disk_full(store: SafeStore) -> Iterator[None]:
    fill_disk(store.store)  # this connection may grow the file no more
    yield  # closing the connection ends it: "space is back" at the next start


FAULTS = {"locked": locked, "disk_full": disk_full}


class Chats:
    """What the first run saved, and what it could not."""

    def __init__(self) -> None:
        self.first = Session(title="chat")
        self.one = Message(session_id=self.first.id, seq=0, role="user", content="one")
        # The first write after the fault: a page or more, so a full disk refuses it (the
        # rest queue behind it).
        self.two = Message(session_id=self.first.id, seq=1, role="user",
                           content="two " * 20_000)
        self.reply = Message(session_id=self.first.id, seq=2, role="assistant",
                             content="part", is_complete=False)
        self.second = Session(title="another chat", position=1)
        self.three = Message(session_id=self.second.id, seq=0, role="user", content="three")


def quit_with_writes_set_aside(db: Path, fault: Callable, aside: Path | None = None) -> Chats:
    """A first run: one chat saved, then the fault, more changes, and a quit with no one to
    ask (SIGTERM), which sets the queue aside (into `aside`, else next to the database);
    the fault is gone afterwards."""
    chats = Chats()
    store = SafeStore.open(db, busy_timeout_s=0.05)  # the test writes as the writer would
    sync = HistoryWriter(store)
    assert store.save_session(chats.first) and store.save_message(chats.one)
    with fault(store):
        store.save_message(chats.two)
        store.save_message(chats.reply)
        store.checkpoint_message(chats.reply.id, "part of a reply")
        store.rename_session(chats.first.id, "renamed")
        store.save_session(chats.second)
        store.save_message(chats.three)
        assert sync.pending_count == 6
        assert not sync.close(set_aside=True)
    assert len(read(aside or set_aside_path(db))) == 6
    return chats


def stored(db: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Titles by session id, and each session's message texts, as another process sees."""
    s = Store.open(db, read_only=True)
    try:
        sessions = s.list_sessions()
        return ({x.id: x.title for x in sessions},
                {x.id: [m.content for m in s.list_messages(x.id)] for x in sessions})
    finally:
        s.close()


def replayed_files(db: Path, kind: str = "replayed") -> list[Path]:
    return sorted(db.parent.glob(f"{db.name}.set-aside.jsonl.{kind}-*"))


@pytest.mark.parametrize("fault", FAULTS)
def test_writes_set_aside_at_a_quit_come_back_at_the_next_start(db_file: Path,
                                                                fault: str) -> None:
    chats = quit_with_writes_set_aside(db_file, FAULTS[fault])
    kept = set_aside_path(db_file).read_bytes()
    sync = HistoryWriter.open(db_file)
    assert words.notice(sync.status()) is not None
    assert "3 messages (in 2 chats) that could not be saved before BatchChat last quit " \
           "were restored to the history" in words.notice(sync.status())
    [moved] = replayed_files(db_file)
    assert f"kept as {moved}" in words.notice(sync.status())
    assert moved.read_bytes() == kept and not set_aside_path(db_file).exists()
    assert sync.close()
    titles, texts = stored(db_file)
    assert titles == {chats.first.id: "renamed", chats.second.id: "another chat"}
    assert texts[chats.first.id] == ["one", chats.two.content, "part of a reply"]
    assert texts[chats.second.id] == ["three"]
    again = HistoryWriter.open(db_file)  # the file was moved: nothing more to say
    assert words.notice(again.status()) is None and again.close()


def test_replaying_the_same_file_twice_adds_nothing_the_second_time(db_file: Path,
                                                                    tmp_path: Path) -> None:
    chats = quit_with_writes_set_aside(db_file, locked)
    copy = tmp_path / "copy.jsonl"
    shutil.copy(set_aside_path(db_file), copy)
    assert HistoryWriter.open(db_file).close()
    before = stored(db_file)
    shutil.copy(copy, set_aside_path(db_file))  # as if it had not been moved
    sync = HistoryWriter.open(db_file)
    assert words.notice(sync.status()) is None  # nothing restored: it was all there
    assert sync.close()
    assert stored(db_file) == before
    conn = sqlite3.connect(db_file)
    assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 4
    assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 2
    conn.close()
    assert len(replayed_files(db_file)) == 2 and chats


def test_a_row_saved_after_the_quit_is_not_overwritten(db_file: Path) -> None:
    chats = quit_with_writes_set_aside(db_file, locked)
    later = Store.open(db_file)  # e.g. a start that could not replay, and more chatting
    newer = Message(session_id=chats.first.id, seq=1, role="user", content="two, edited",
                    id=chats.two.id)
    later.save_message(newer)
    later.rename_session(chats.first.id, "named later")
    later.close()
    sync = HistoryWriter.open(db_file)
    assert "2 messages (in 2 chats)" in (words.notice(sync.status()) or "")
    assert sync.close()
    titles, texts = stored(db_file)
    assert titles[chats.first.id] == "named later"
    assert texts[chats.first.id] == ["one", "two, edited", "part of a reply"]
    assert texts[chats.second.id] == ["three"]


def test_a_file_with_lines_that_cannot_be_replayed_is_kept_and_named(db_file: Path) -> None:
    chats = quit_with_writes_set_aside(db_file, locked)
    path = set_aside_path(db_file)
    with path.open("a", encoding="ascii") as f:
        f.write("this is not JSON\n")
        f.write(json.dumps({"time": "2026-01-01T00:00:00+00:00", "write": "frobnicate",
                            "args": []}) + "\n")
    kept = path.read_bytes()
    sync = HistoryWriter.open(db_file)
    notice = words.notice(sync.status()) or ""
    assert sync.close()
    assert "3 messages (in 2 chats)" in notice  # the lines that could be, were
    assert "2 set-aside changes could not be restored (line 7: not JSON" in notice
    assert "line 8: unknown kind of change 'frobnicate'" in notice
    [moved] = replayed_files(db_file, "not-replayed")
    assert f"kept as {moved}" in notice and moved.read_bytes() == kept
    assert not path.exists()
    assert stored(db_file)[1][chats.second.id] == ["three"]


def test_a_database_still_locked_at_start_keeps_the_file_for_the_next(db_file: Path) -> None:
    chats = quit_with_writes_set_aside(db_file, locked)
    other = hold_write_lock(db_file)
    try:
        sync = HistoryWriter.open(db_file)
        notice = words.notice(sync.status()) or ""
        sync.close()
    finally:
        other.rollback()
        other.close()
    assert "could not be written back to the history yet" in notice and "locked" in notice
    assert set_aside_path(db_file).exists() and not replayed_files(db_file)
    assert chats.second.id not in stored(db_file)[0]
    sync = HistoryWriter.open(db_file)
    assert "3 messages (in 2 chats)" in (words.notice(sync.status()) or "") and sync.close()
    assert chats.second.id in stored(db_file)[0]


def test_the_data_directory_fallback_is_replayed_into_its_own_database(
        db_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "elsewhere"
    data.mkdir()
    monkeypatch.setenv("BATCHCHAT_DATA_DIR", str(data))
    fallback = data / "history.db.set-aside.jsonl"
    blocker = set_aside_path(db_file)
    blocker.parent.mkdir(parents=True)
    blocker.mkdir()  # the usual file cannot be written: the quit falls back
    chats = quit_with_writes_set_aside(db_file, locked, fallback)
    blocker.rmdir()
    other_db = tmp_path / "other" / "history.db"
    sync = HistoryWriter.open(other_db)  # another history: none of those lines are its own
    assert words.notice(sync.status()) is None and sync.close()
    assert fallback.exists() and len(read(fallback)) == 6
    sync = HistoryWriter.open(db_file)
    assert "3 messages (in 2 chats)" in (words.notice(sync.status()) or "") and sync.close()
    assert not fallback.exists() and list(data.glob("history.db.set-aside.jsonl.replayed-*"))
    assert stored(db_file)[0][chats.first.id] == "renamed"

