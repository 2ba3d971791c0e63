"""Import an export document (app.history.export) into a store, adding what is new.

Rules: ids are kept. A row whose id is already in the database is never
overwritten: it is skipped, and so is a skipped session's or run's whole content
(its messages or results), so an existing conversation is never merged into.
Everything happens in one transaction: a bad file adds nothing. A request's stats that
link to a chat, message or run neither in the file nor in the history keep their numbers
without the link (as when that chat is deleted).

A chat is a tree of messages (format version 2: each message's parent_id and seq, the
session's shown_leaf_id and pinned). An export from before (version 1) names no parents: its
chats become one path each. Parents that do not make a tree are dropped, and the report
says so (app/history/import_tree.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from app.storage import (
    Message,
    RequestStatsRecord,
    Session,
    SimResult,
    SimRun,
    StatsSnapshot,
    Store,
)
from app.storage.add_new import NewRows
from app.storage.records import Record

from ..plural import counted
from .export import EXPORT_FORMAT, FORMAT_VERSION, SESSION_FORMAT
from .import_files import files_by_message
from .import_tree import link_messages

R = TypeVar("R", bound=Record)
# An export nests about 6 deep (sessions, a message, its stats); a settings object may add a
# few. Deeper documents are refused before anything recurses through them (the record
# checks and the storage would hit Python's recursion limit: a RecursionError, not a message).
MAX_DEPTH = 100


# what a table's rows are called in the report: (one, several)
_NAMES = {"sessions": ("chat", "chats"), "messages": ("message", "messages"),
          "sim_runs": ("simulation run", "simulation runs"),
          "sim_results": ("simulation result", "simulation results"),
          "request_stats": ("request stats record", "request stats records"),
          "stats_snapshots": ("stats snapshot", "stats snapshots"),
          "message_attachments": ("attached file", "attached files")}


@dataclass(slots=True)
class ImportReport:
    added: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what was changed to import it
    session_ids: list[str] = field(default_factory=list)  # the chats added, in file order

    def count(self, table: str, added: bool, n: int = 1) -> None:
        if n <= 0:
            return
        bucket = self.added if added else self.skipped
        bucket[table] = bucket.get(table, 0) + n

    def summary(self) -> str:
        def fmt(counts: dict[str, int]) -> str:
            return ", ".join(counted(n, *_NAMES.get(t, (t.replace("_", " "),)))
                             for t, n in counts.items()) or "nothing"
        text = f"Imported {fmt(self.added)}."
        if self.skipped:
            text += f" Skipped {fmt(self.skipped)} already in the history (left as they were)."
        return " ".join([text, *self.notes])


def import_document(store: Store, doc: dict[str, Any], *, closed: bool = False) -> ImportReport:
    """Import a full export or a single-session export. Raises ValueError for a file
    that is not one, StorageError if the database cannot be written (nothing added).
    `closed`: the chats come in closed (the app: no tab shows them until one is opened),
    else open or not as exported."""
    if _deeper_than(doc, MAX_DEPTH):
        raise ValueError(f"This file is not a BatchChat export: its JSON is too deeply "
                         f"nested (more than {MAX_DEPTH} levels).")
    fmt, version = doc.get("format"), doc.get("format_version")
    if fmt not in (EXPORT_FORMAT, SESSION_FORMAT):
        raise ValueError("This file is not a BatchChat export.")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(f"This export has format version {version}; this BatchChat reads "
                         f"up to {FORMAT_VERSION}. Update BatchChat to import it.")
    files = files_by_message(doc)  # before the single-chat form is rewritten
    if fmt == SESSION_FORMAT:
        if not isinstance(doc.get("session"), dict):
            raise ValueError("This single-chat export has no session object.")
        doc = {"sessions": [doc["session"]]}
    # Parse everything before writing, so a malformed file is refused whole; an error
    # names where the record is in the file, the record and the field.
    sessions = [(_parse(Session, _without(s, "messages"), where),
                 _children(Message, s, "messages", "session_id", where))
                for where, s in _items(doc, "sessions", "")]
    # A chat none of whose messages names a parent was written before trees: one path.
    chained = {session.id for (session, _), (_, raw) in zip(
        sessions, _items(doc, "sessions", ""), strict=True)
        if not any("parent_id" in m for m in raw.get("messages", []))}
    runs = [(_parse(SimRun, _without(r, "results"), where),
             _children(SimResult, r, "results", "sim_run_id", where))
            for where, r in _items(doc, "sim_runs", "")]
    requests = [_parse(RequestStatsRecord, r, where)
                for where, r in _items(doc, "request_stats", "")]
    snapshots = [_parse(StatsSnapshot, r, where)
                 for where, r in _items(doc, "stats_snapshots", "")]

    report = ImportReport()
    added_messages: list[str] = []
    with store.adding_new() as rows:

        def add(records: Sequence[Record]) -> None:
            if records:
                added = rows.add(records)
                report.count(records[0].TABLE, True, added)
                report.count(records[0].TABLE, False, len(records) - added)

        for parent, children in [*sessions, *runs]:
            if rows.exists(parent):
                report.count(parent.TABLE, False)
                report.count(Message.TABLE if parent.TABLE == "sessions" else SimResult.TABLE,
                             False, len(children))
                continue
            if isinstance(parent, Session):  # only the messages added make its tree
                new = [m for m in children if not rows.has(Message.TABLE, m.id)]
                added_messages += [m.id for m in new]
                report.notes += link_messages(parent, new, chain=parent.id in chained)
                parent.is_open = parent.is_open and not closed
                report.session_ids.append(parent.id)
            add([parent])
            add(children)
        for message_id in added_messages:  # their files, with them (#51)
            if files.get(message_id):
                rows.add_files(message_id, files[message_id])
                report.count("message_attachments", True, len(files[message_id]))
        add(_drop_dangling_links(requests, rows))
        add(snapshots)
    return report


LINKS = (("session_id", "sessions"), ("message_id", "messages"), ("sim_run_id", "sim_runs"))


def _drop_dangling_links(records: list[RequestStatsRecord],
                         rows: NewRows) -> list[RequestStatsRecord]:
    """Links to rows that are not there set to None (the database would refuse them: its
    foreign keys), after the file's chats and runs are added."""
    for record in records:
        for name, table in LINKS:
            target = getattr(record, name)
            if target is not None and not rows.has(table, target):
                setattr(record, name, None)
    return records


def _items(doc: dict[str, Any], key: str, prefix: str) -> list[tuple[str, dict[str, Any]]]:
    """The records under `key` with where each one is ("sessions[2]"); a missing key is
    none, anything but a list of objects is refused."""
    where = f"{prefix}{key}"
    items = doc.get(key, [])
    if not isinstance(items, list):
        raise ValueError(f"{where} must be a list (got {type(items).__name__})")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"{where}[{i}] must be an object (got {type(item).__name__})")
    return [(f"{where}[{i}]", item) for i, item in enumerate(items)]


def _parse(cls: type[R], data: dict[str, Any], where: str) -> R:
    try:
        return cls.from_dict(data)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _children(cls: type[R], parent: dict[str, Any], key: str, link: str,
                         where: str) -> list[R]:
    """A session's messages or a run's results; each must belong to its parent."""
    out = []
    for child_where, data in _items(parent, key, f"{where}."):
        child = _parse(cls, data, child_where)
        if getattr(child, link) != parent.get("id"):
            raise ValueError(f"{child_where}: {cls.TABLE} record {child.id}: field {link} "
                             f"is {getattr(child, link)!r}, not the id of the record it is "
                             f"in ({parent.get('id')!r})")
        out.append(child)
    return out


def _without(d: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}


def _deeper_than(doc: Any, limit: int) -> bool:
    """Whether lists and objects nest more than `limit` deep (iterative: no recursion)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((v, depth + 1) for v in children if isinstance(v, dict | list))
    return False
