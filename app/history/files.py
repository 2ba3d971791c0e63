"""What the history view lists, and its export/import actions (Qt-free).

Each function reads through a HistoryReader (the import, HistoryWriter's, writes through
the store it is given) and raises StorageError (database),
OSError (file) or ValueError (not an export) with a message fit for the user.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.storage import SafeStore, SessionSummary, SimRun

from . import export
from .import_json import ImportReport, import_document
from .reader import HistoryReader
from .sidebar import MATCH_MARKS

Kind = Literal["session", "sim_run"]
PathLike = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    kind: Kind
    id: str
    title: str
    count: int  # messages, or simulated requests
    when: str  # last active (session) or started (run), UTC ISO
    is_open: bool = False
    snippet: str = ""  # the matching text, for a search (MATCH_MARKS around the match)
    # The message that matched (a search; maybe a version the chat does not show): opening
    # the chat shows the path through it.
    message_id: str | None = None


def list_entries(reader: HistoryReader, query: str = "") -> list[HistoryEntry]:
    """Sessions, most recently active first, then simulation runs, newest first; with a
    query, the full-text matches (best first)."""
    sessions = {s.session.id: s for s in reader.list_history()}
    runs = {r.id: r for r in reader.list_sim_runs()}
    if not query.strip():
        out = [_session_entry(s) for s in sessions.values()]
        return out + [_run_entry(reader, r) for r in runs.values()]
    entries = []
    for hit in reader.search(query, marks=MATCH_MARKS):  # a view bolds the match
        if hit.kind == "session" and hit.id in sessions:
            entries.append(_session_entry(sessions[hit.id], hit.snippet, hit.message_id))
        elif hit.kind == "sim_run" and hit.id in runs:
            entries.append(_run_entry(reader, runs[hit.id], hit.snippet))
    return entries


def _session_entry(summary: SessionSummary, snippet: str = "",
                   message_id: str | None = None) -> HistoryEntry:
    s = summary.session
    return HistoryEntry("session", s.id, s.title, summary.message_count,
                        summary.last_active_at, s.is_open, snippet, message_id)


def _run_entry(reader: HistoryReader, run: SimRun, snippet: str = "") -> HistoryEntry:
    count = len(reader.load_sim_run(run.id).results)
    return HistoryEntry("sim_run", run.id, run.title, count, run.started_at, False, snippet)


def export_session(reader: HistoryReader, session_id: str, path: PathLike,
                   fmt: Literal["markdown", "json"]) -> None:
    loaded = reader.load_session(session_id)
    text = export.session_to_markdown(loaded) if fmt == "markdown" \
        else export.session_to_json(loaded)
    export.write_atomic(path, text)


def export_everything(reader: HistoryReader, path: PathLike) -> None:
    export.write_atomic(path, export.export_all_json(reader._whole()))


def export_stats(reader: HistoryReader, path: PathLike, fmt: Literal["csv", "json"]) -> None:
    """Per-request stats (CSV), or requests and snapshots (JSON)."""
    requests = reader.list_request_stats()
    text = export.request_stats_to_csv(requests) if fmt == "csv" \
        else export.stats_to_json(requests, reader.list_stats_snapshots())
    export.write_atomic(path, text)


def export_sim_runs(reader: HistoryReader, path: PathLike,
                    fmt: Literal["csv", "json"]) -> None:
    """One row per run (CSV), or the runs with every result (JSON)."""
    runs = reader.list_sim_runs()
    text = export.sim_runs_to_csv(runs) if fmt == "csv" \
        else export.sim_runs_to_json(reader.load_sim_run(r.id) for r in runs)
    export.write_atomic(path, text)


def import_file(store: SafeStore, path: PathLike, *, closed: bool = False) -> ImportReport:
    """Add what a BatchChat export holds that the history does not have yet (`closed`:
    its chats closed, see import_document)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not a BatchChat export ({exc}).") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not a BatchChat export (not JSON: {exc}).") from exc
    except RecursionError:  # the parser recurses once per level of nesting
        raise _too_deep(path) from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path} is not a BatchChat export.")
    try:
        return import_document(store.reader, doc, closed=closed)
    except RecursionError:  # a value nested just shallowly enough to parse, too deep to copy
        raise _too_deep(path) from None


def _too_deep(path: PathLike) -> ValueError:
    return ValueError(f"{path} is not a BatchChat export: its JSON is too deeply nested "
                      f"(more than about {sys.getrecursionlimit()} levels).")
