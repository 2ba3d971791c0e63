"""Import an export document (app.history.export) into a store, adding what is new.

Rules: ids are kept. A row whose id is already in the database is never
overwritten: it is skipped, and so is a skipped session's or run's whole content
(its messages or results), so an existing conversation is never merged into.
Everything happens in one transaction: a bad file adds nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.storage import (
    Message,
    RequestStatsRecord,
    Session,
    SimResult,
    SimRun,
    StatsSnapshot,
    Store,
)
from app.storage.records import Record

from .export import EXPORT_FORMAT, FORMAT_VERSION, SESSION_FORMAT


@dataclass(slots=True)
class ImportReport:
    added: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def count(self, table: str, added: bool, n: int = 1) -> None:
        if n <= 0:
            return
        bucket = self.added if added else self.skipped
        bucket[table] = bucket.get(table, 0) + n

    def summary(self) -> str:
        def fmt(counts: dict[str, int]) -> str:
            return ", ".join(f"{n} {t.replace('_', ' ')}" for t, n in counts.items()) or "nothing"
        text = f"Imported {fmt(self.added)}."
        if self.skipped:
            text += f" Skipped {fmt(self.skipped)} already in the history (left as they were)."
        return text


def import_document(store: Store, doc: dict[str, Any]) -> ImportReport:
    """Import a full export or a single-session export. Raises ValueError for a file
    that is not one, StorageError if the database cannot be written (nothing added)."""
    fmt, version = doc.get("format"), doc.get("format_version")
    if fmt not in (EXPORT_FORMAT, SESSION_FORMAT):
        raise ValueError("This file is not a BatchChat export.")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(f"This export has format version {version}; this BatchChat reads "
                         f"up to {FORMAT_VERSION}. Update BatchChat to import it.")
    if fmt == SESSION_FORMAT:
        doc = {"sessions": [doc["session"]]}
    # Parse everything before writing, so a malformed file is refused whole.
    sessions = [(Session.from_dict(_without(s, "messages")),
                 [Message.from_dict(m) for m in s.get("messages", [])])
                for s in doc.get("sessions", [])]
    runs = [(SimRun.from_dict(_without(r, "results")),
             [SimResult.from_dict(x) for x in r.get("results", [])])
            for r in doc.get("sim_runs", [])]
    requests = [RequestStatsRecord.from_dict(r) for r in doc.get("request_stats", [])]
    snapshots = [StatsSnapshot.from_dict(s) for s in doc.get("stats_snapshots", [])]

    report = ImportReport()
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
            add([parent])
            add(children)
        add(requests)
        add(snapshots)
    return report


def _without(d: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}
