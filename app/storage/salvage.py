"""Carrying what can still be read from a damaged history file into a fresh one.

Table by table, parents first; a table whose scan fails part-way is read again row by
row, by the rowids its indexes (separate pages, often intact) and the scan still gave.
Rows go in unchanged (same ids), through the fresh file's triggers, so search works. A
message whose chat row was lost is kept under a placeholder chat, not dropped."""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlite_utils import Database

from app.storage.records import Session

# Parents before children, so foreign keys find their rows: a message's files after the
# messages (#51), their texts first; the API server's stored responses (#53) and drafts'
# files (#52) stand alone.
TABLES = ("sessions", "messages", "attachment_texts", "message_attachments", "sim_runs",
          "sim_results", "request_stats", "stats_snapshots", "api_responses",
          "draft_attachments")
_WORDS = {"sessions": "chats", "messages": "messages", "sim_runs": "simulation runs",
          "sim_results": "simulated requests", "request_stats": "request stats",
          "stats_snapshots": "stats snapshots", "attachment_texts": "attached file texts",
          "message_attachments": "attached files", "api_responses": "stored API responses",
          "draft_attachments": "unsent drafts' files"}


@dataclass
class SalvageReport:
    recovered: dict[str, int] = field(default_factory=dict)
    lost: dict[str, int] = field(default_factory=dict)  # rows known to exist, unreadable
    unreadable_tables: list[str] = field(default_factory=list)

    def summary(self) -> str:
        def fmt(counts: dict[str, int]) -> str:
            return ", ".join(f"{n} {_WORDS.get(t, t)}" for t, n in counts.items() if n)

        text = f"Recovered {fmt(self.recovered) or 'nothing'}."
        if any(self.lost.values()):
            text += f" Could not read {fmt(self.lost)}."
        if self.unreadable_tables:
            text += (" Nothing at all could be read of: "
                     f"{', '.join(_WORDS.get(t, t) for t in self.unreadable_tables)}.")
        return text


def copy_readable_rows(damaged: Path, fresh: Database) -> SalvageReport:
    """Copy every row that can be read from `damaged` (opened read-only) into `fresh`."""
    report = SalvageReport()
    try:
        src = sqlite3.connect(f"file:{quote(str(damaged.resolve()))}?mode=ro", uri=True)
    except sqlite3.Error:
        report.unreadable_tables = list(TABLES)
        return report
    try:
        return copy_rows(src, fresh)
    finally:
        src.close()


def copy_rows(src: sqlite3.Connection, fresh: Database) -> SalvageReport:
    """Copy every row `src` can read into `fresh` (also used to save a read-only history
    to another file)."""
    report = SalvageReport()
    factory = src.row_factory
    try:
        for table in TABLES:
            _copy_table(src, fresh, table, report)
    finally:
        src.row_factory = factory
    return report


def _copy_table(src: sqlite3.Connection, fresh: Database, table: str,
                report: SalvageReport) -> None:
    src.row_factory = sqlite3.Row
    columns = set(fresh[table].columns_dict)
    rows: list[dict[str, Any]] = []
    complete = True
    try:
        for row in src.execute(f'SELECT rowid AS "__rowid", * FROM "{table}"'):
            rows.append(dict(row))
    except sqlite3.DatabaseError:
        complete = False
    lost = 0
    if not complete:
        seen = {r["__rowid"] for r in rows}
        for rowid in sorted(_rowids(src, table) - seen):
            try:
                row = src.execute(f'SELECT rowid AS "__rowid", * FROM "{table}" '
                                  "WHERE rowid = ?", [rowid]).fetchone()
            except sqlite3.DatabaseError:
                row = None
            if row is None:
                lost += 1
            else:
                rows.append(dict(row))
        if not rows and not lost:
            report.unreadable_tables.append(table)
    added = 0
    with fresh.conn:  # one transaction per table
        for row in rows:
            values = {k: v for k, v in row.items() if k in columns}
            if _insert(fresh, table, values):
                added += 1
            else:
                lost += 1
    report.recovered[table] = added
    report.lost[table] = lost


def _rowids(src: sqlite3.Connection, table: str) -> set[int]:
    """Rowids the table's indexes list (an index lives on its own pages)."""
    found: set[int] = set()
    with contextlib.suppress(sqlite3.DatabaseError):
        names = [r[0] for r in src.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", [table])]
        for name in names:
            with contextlib.suppress(sqlite3.DatabaseError):
                for (rowid,) in src.execute(
                        f'SELECT rowid FROM "{table}" INDEXED BY "{name}"'):
                    found.add(rowid)
    return found


def _insert(fresh: Database, table: str, values: dict[str, Any]) -> bool:
    """Insert one row; a lost parent is replaced (a chat) or forgotten (stats links)."""
    for _attempt in range(2):
        try:
            cols = ", ".join(f'"{c}"' for c in values)
            fresh.conn.execute(f'INSERT OR IGNORE INTO "{table}" ({cols}) VALUES '
                               f'({", ".join("?" * len(values))})', list(values.values()))
            return True
        except sqlite3.IntegrityError:
            if table == "messages" and values.get("session_id"):
                _placeholder_session(fresh, values["session_id"])
            elif table == "request_stats":
                values = values | {"session_id": None, "message_id": None, "sim_run_id": None}
            else:
                return False
        except sqlite3.Error:
            return False
    return False


def _placeholder_session(fresh: Database, session_id: str) -> None:
    row = Session(title="Recovered messages", is_open=False, id=session_id).to_row()
    cols = ", ".join(f'"{c}"' for c in row)
    fresh.conn.execute(f'INSERT OR IGNORE INTO "sessions" ({cols}) VALUES '
                       f'({", ".join("?" * len(row))})', list(row.values()))
