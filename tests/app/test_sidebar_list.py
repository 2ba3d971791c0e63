"""The sidebar's list, Qt-free: grouping by day on fixed dates, the merge of saved and open
chats, and search over every version in a real SQLite file."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

from app.conversation import Conversation
from app.history import convert
from app.history.sidebar import (
    MATCH_MARKS,
    ChatList,
    ChatRow,
    Header,
    day_label,
    grouped,
    one_line,
)
from app.history.writer import HistoryWriter
from app.storage import Message, SafeStore, Session

NOW = datetime(2026, 11, 26, 15, 0, tzinfo=UTC)  # a Thursday


def row(name: str, when: datetime, pinned: bool = False) -> ChatRow:
    return ChatRow(name, name, "", when, pinned=pinned)


def test_day_labels() -> None:
    today = date(2026, 11, 26)
    assert day_label(today, today) == "Today"
    assert day_label(today + timedelta(days=1), today) == "Today"  # a clock set back
    assert day_label(date(2026, 11, 25), today) == "Yesterday"
    assert day_label(date(2026, 11, 24), today) == "Tuesday"
    assert day_label(date(2026, 11, 20), today) == "Friday"  # 6 days ago
    assert day_label(date(2026, 11, 19), today) == "19 November"  # a week ago
    assert day_label(date(2025, 12, 31), today) == "31 December 2025"


def test_grouped_pinned_first_then_by_day_recent_first() -> None:
    rows = [
        row("old", datetime(2026, 10, 2, 9, tzinfo=UTC)),
        row("today-early", NOW.replace(hour=1)),
        row("pinned-old", datetime(2025, 3, 1, tzinfo=UTC), pinned=True),
        row("yesterday", NOW - timedelta(days=1)),
        row("today-late", NOW.replace(hour=14)),
        row("monday", NOW - timedelta(days=3)),
        row("monday-2", NOW - timedelta(days=3, hours=2)),
        row("pinned-new", NOW, pinned=True),
    ]
    entries = grouped(rows, NOW, tz=UTC)
    shown = [e.label if isinstance(e, Header) else e.session_id for e in entries]
    assert shown == ["Pinned", "pinned-new", "pinned-old",
                     "Today", "today-late", "today-early",
                     "Yesterday", "yesterday",
                     "Monday", "monday", "monday-2",
                     "2 October", "old"]


def test_days_are_the_given_time_zones() -> None:
    late = datetime(2026, 11, 25, 23, 30, tzinfo=UTC)  # already the 26th east of UTC
    east = timezone(timedelta(hours=2))
    assert [e.label for e in grouped([row("a", late)], NOW, tz=UTC)
            if isinstance(e, Header)] == ["Yesterday"]
    assert [e.label for e in grouped([row("a", late)], NOW, tz=east)
            if isinstance(e, Header)] == ["Today"]


def test_one_line() -> None:
    assert one_line("  a\n\n b\tc  ") == "a b c"
    assert one_line("x" * 10, limit=5) == "xxxx…"


def tree_chat(store: SafeStore) -> tuple[Session, dict[str, Message]]:
    """A saved chat: a question, two versions of its answer (the second shown)."""
    session = Session(title="Fruit talk")
    q = Message(session_id=session.id, seq=0, role="user", content="Name a fruit")
    v1 = Message(session_id=session.id, seq=1, role="assistant", parent_id=q.id,
                 content="Apricots grow on small trees")
    v2 = Message(session_id=session.id, seq=2, role="assistant", parent_id=q.id,
                 content="Bananas are berries, botanically")
    session.shown_leaf_id = v2.id
    store.save_session(session)
    for m in (q, v1, v2):
        store.save_message(m)
    return session, {"q": q, "v1": v1, "v2": v2}


def test_search_finds_a_word_only_in_a_version_not_shown(tmp_path: Path) -> None:
    store = SafeStore.open(tmp_path / "h.db")  # the test writes as the writer would
    sync = HistoryWriter.over(store)
    session, msgs = tree_chat(store)
    other = Session(title="Unrelated")
    store.save_session(other)
    store.save_message(Message(session_id=other.id, seq=0, role="user",
                                    content="weather tomorrow"))
    chats = ChatList(sync.reader, lambda: [])
    chats.refresh()
    # the list shows the path shown: its last message is the second version
    [shown] = [r for r in chats.rows() if r.session_id == session.id]
    assert shown.preview == "Bananas are berries, botanically"
    [hit] = chats.search("apricot")
    assert (hit.session_id, hit.title, hit.message_id) == (session.id, "Fruit talk",
                                                           msgs["v1"].id)
    assert f"{MATCH_MARKS[0]}Apricots{MATCH_MARKS[1]}" in hit.snippet
    # opening the hit shows that version
    conv = convert.conversation(sync.reader.load_session(session.id), None)  # type: ignore[arg-type]
    assert conv.messages[-1].id == msgs["v2"].id
    conv.show(hit.message_id)
    assert [m.id for m in conv.messages] == [msgs["q"].id, msgs["v1"].id]
    # titles are searched too; a chat waiting to be deleted is not listed nor found
    assert [h.session_id for h in chats.search("fruit")] == [session.id]
    chats.hidden.add(session.id)
    assert chats.search("apricot") == []
    assert [r.session_id for r in chats.rows()] == [other.id]
    sync.close()


def test_open_chats_bring_their_live_title_and_last_message(tmp_path: Path) -> None:
    store = SafeStore.open(tmp_path / "h.db")  # the test writes as the writer would
    sync = HistoryWriter.over(store)
    session, _msgs = tree_chat(store)
    loaded = convert.conversation(sync.reader.load_session(session.id), None)  # type: ignore[arg-type]
    loaded.title = "Renamed, not saved yet"
    empty = Conversation(None)  # type: ignore[arg-type]  # a new tab: not listed
    # after the messages were saved (with the real clock): a fixed time here failed from
    # 15:05 on the day it was written
    later = datetime.now(UTC) + timedelta(minutes=5)
    chats = ChatList(sync.reader, lambda: [loaded, empty], clock=lambda: later)
    chats.refresh()
    [r] = chats.rows()
    assert (r.title, r.is_open, r.preview) == ("Renamed, not saved yet", True,
                                               "Bananas are berries, botanically")
    assert r.active < later
    chats.touch(session.id)
    assert chats.row(session.id).active == later  # a message added now: it moves up
    sync.close()


def test_pin_and_rename_through_the_history_writer(tmp_path: Path) -> None:
    store = SafeStore.open(tmp_path / "h.db")  # the test writes as the writer would
    sync = HistoryWriter.over(store)
    session, _msgs = tree_chat(store)
    before = sync.reader.list_chats()[0].last_active_at
    sync.set_pinned(session.id, True)
    sync.rename_session(session.id, "Berries")
    [s] = sync.reader.list_chats()
    assert (s.pinned, s.title) == (True, "Berries")
    assert s.last_active_at == before  # pinning and renaming are not activity
    sync.close()
