"""The sidebar's list, Qt-free: saved and open chats, recent first, grouped by day; search.

`ChatList` merges what the history store holds (one query, `Store.list_chats`) with the
open chats (their live title and last message, ahead of the store's delayed saves), hides
chats waiting to be deleted (the sidebar's undo), and searches every message of every
version (`Store.search`, SQLite FTS). `grouped` puts rows under "Pinned", "Today",
"Yesterday", the weekday's name for the last week, then dates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, tzinfo
from typing import TYPE_CHECKING

from app.storage import StorageError
from app.storage.chat_list import ChatSummary

if TYPE_CHECKING:
    from app.conversation import Conversation
    from app.history.reader import HistoryReader

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
PINNED = "Pinned"
PREVIEW_CHARS = 120
SEARCH_LIMIT = 100
# A search snippet's match is wrapped in these (control characters never typed in a chat),
# so a view can bold it after escaping the text.
MATCH_MARKS = ("\x02", "\x03")


@dataclass(frozen=True, slots=True)
class ChatRow:
    """One chat in the sidebar. `snippet`/`message_id`: a search hit's text around the
    match (MATCH_MARKS around it) and the message it is in (None: the title matched)."""

    session_id: str
    title: str
    preview: str
    active: datetime  # timezone-aware
    pinned: bool = False
    is_open: bool = False  # a tab shows it
    snippet: str = ""
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Header:
    """A group's name above its rows."""

    label: str


Entry = Header | ChatRow


def one_line(text: str, limit: int = PREVIEW_CHARS) -> str:
    """`text` on one line (runs of whitespace as one space), cut at `limit` with "…"."""
    line = re.sub(r"\s+", " ", text).strip()
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def parse_time(stamp: str) -> datetime:
    """A stored UTC ISO-8601 time as an aware datetime (a naive one is taken as UTC)."""
    when = datetime.fromisoformat(stamp)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def day_label(day: date, today: date) -> str:
    """"Today", "Yesterday", a weekday's name within the last week, else the date (with
    its year when not this year's). A day after `today` (a clock set back) is "Today"."""
    ago = (today - day).days
    if ago <= 0:
        return "Today"
    if ago == 1:
        return "Yesterday"
    if ago < 7:
        return WEEKDAYS[day.weekday()]
    text = f"{day.day} {MONTHS[day.month - 1]}"
    return text if day.year == today.year else f"{text} {day.year}"


def grouped(rows: Iterable[ChatRow], now: datetime, tz: tzinfo | None = None) -> list[Entry]:
    """Pinned chats first, then the rest by day, each group most recently active first;
    days are `tz`'s (None: the computer's local time)."""
    ordered = sorted(rows, key=lambda r: r.active, reverse=True)
    today = now.astimezone(tz).date()
    out: list[Entry] = []
    pinned = [r for r in ordered if r.pinned]
    if pinned:
        out.append(Header(PINNED))
        out.extend(pinned)
    label = None
    for row in ordered:
        if row.pinned:
            continue
        day = day_label(row.active.astimezone(tz).date(), today)
        if day != label:
            out.append(Header(day))
            label = day
        out.append(row)
    return out


class ChatList:
    """The sidebar's data: `rows()`, `entries()` (grouped), `search(text)`.

    `refresh()` re-reads the store (on opening and closing chats, after the sidebar's own
    changes, on a slow timer), never per token: an open chat's title, last message and
    activity come from the chat itself (`touch` when a message is added)."""

    def __init__(self, reader: HistoryReader, open_chats: Callable[[], list[Conversation]],
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.reader = reader
        self.open_chats = open_chats
        self.clock = clock
        self.hidden: set[str] = set()  # waiting to be deleted (the user may still undo)
        self.error: str | None = None  # why the store could not be read, if it could not
        self._stored: list[ChatSummary] = []
        self._touched: dict[str, datetime] = {}  # session id -> a message added then

    def refresh(self) -> None:
        try:
            self._stored = self.reader.list_chats()
            self.error = None
        except StorageError as exc:  # keep showing what was read before
            self.error = str(exc)

    def touch(self, session_id: str) -> None:
        """An open chat had a message added now: it moves to the top."""
        self._touched[session_id] = self.clock()

    def rows(self) -> list[ChatRow]:
        """Every chat with a message, saved or open, but the hidden ones; unsorted."""
        live = {c.session_id: c for c in self.open_chats() if c.tree.nodes}
        rows: list[ChatRow] = []
        for s in self._stored:
            if s.id in self.hidden or (s.message_count == 0 and s.id not in live):
                continue
            row = ChatRow(s.id, s.title, one_line(s.preview), parse_time(s.last_active_at),
                          pinned=s.pinned)
            rows.append(self._live(row, live.pop(s.id, None)))
        for conv in live.values():  # not saved yet (or the history is in memory only)
            if conv.session_id not in self.hidden:
                row = ChatRow(conv.session_id, conv.title, "", self.clock())
                rows.append(self._live(row, conv))
        return rows

    def _live(self, row: ChatRow, conv: Conversation | None) -> ChatRow:
        if conv is None:
            return row
        path = conv.messages
        touched = self._touched.get(row.session_id)
        return replace(row, title=conv.title, is_open=True,
                       preview=one_line(path[-1].content) if path else row.preview,
                       active=max(row.active, touched) if touched else row.active)

    def entries(self) -> list[Entry]:
        return grouped(self.rows(), self.clock())

    def row(self, session_id: str) -> ChatRow | None:
        return next((r for r in self.rows() if r.session_id == session_id), None)

    def search(self, text: str) -> list[ChatRow]:
        """Chats whose title or any message (every version, shown or not) has every word
        of `text` (as prefixes), best match first, each with a snippet of the match."""
        try:
            hits = self.reader.search(text, limit=SEARCH_LIMIT,
                                                    marks=MATCH_MARKS)
            self.error = None
        except StorageError as exc:
            self.error = str(exc)
            return []
        rows = {r.session_id: r for r in self.rows()}
        out = []
        for hit in hits:
            row = rows.get(hit.id) if hit.kind == "session" else None
            if row is not None:
                out.append(replace(row, snippet=one_line(hit.snippet, 200),
                                   message_id=hit.message_id))
        return out
