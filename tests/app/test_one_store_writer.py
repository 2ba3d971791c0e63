"""The history store has one writer, HistorySync: the API server's request stats, the stats
panel's snapshots, simulation runs and history imports are handed to it, and no other product
module calls a store's write methods (so every write is queued, retried and reported the same
way; an import is written at once, as before)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import SimpleNamespace

from app.history.sync import HistorySync
from app.server.in_app import AppServer
from app.storage import SafeStore
from engine.public import RequestStats

ROOT = Path(__file__).resolve().parents[2]
# HistorySync, and the import it runs (HistorySync.import_file -> files.import_file)
WRITERS = {ROOT / "app" / "history" / "sync.py", ROOT / "app" / "history" / "files.py"}


def write_methods() -> set[str]:
    """SafeStore's writes: the methods that queue a write."""
    return {name for name, fn in vars(SafeStore).items()
            if inspect.isfunction(fn) and "self._submit(" in inspect.getsource(fn)}


def test_history_sync_offers_every_write_the_app_makes():
    writes = write_methods()
    assert {"save_message", "record_request_stats", "add_stats_snapshot", "save_sim_run",
            "add_sim_results"} <= writes
    for name in ("record_request_stats", "add_stats_snapshot", "save_sim_run",
                 "add_sim_results", "delete_sim_run"):
        assert callable(getattr(HistorySync, name)), name


def test_no_module_but_history_sync_writes_to_a_store():
    names = "|".join(sorted(write_methods()))
    direct = re.compile(rf"\bstore\s*\.\s*({names})\b")  # store.save_message(...)
    by_name = re.compile(r"getattr\(\s*[\w.]*store\b")  # getattr(self.store, "save_…")
    imports = re.compile(r"import_(file|document)\(\s*[\w.]*store\b")  # an import's rows
    offenders = []
    for path in sorted([*ROOT.glob("app/**/*.py"), *ROOT.glob("ui/**/*.py")]):
        if path in WRITERS or path.is_relative_to(ROOT / "app" / "storage"):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("def "):
                continue
            if direct.search(line) or by_name.search(line) or imports.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []


class Recorder:
    def __init__(self) -> None:
        self.records: list[object] = []

    def record_request_stats(self, record: object) -> None:
        self.records.append(record)


class NoWrites:
    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the API server wrote to the store itself ({name})")


def test_the_api_server_hands_finished_requests_to_the_history():
    history = Recorder()
    server = AppServer(SimpleNamespace(history=history, store=NoWrites()))  # type: ignore[arg-type]
    stats = RequestStats("api-1", "api", "interactive", 0.01, 7, 0.05, 3, 0.2, 10.0, 0.3,
                         "stop", 0, cached_tokens=2)
    server._record(stats)
    [record] = history.records
    assert (record.request_id, record.prompt_tokens, record.cached_tokens,  # type: ignore[attr-defined]
            record.generated_tokens, record.finish_reason) == ("api-1", 7, 2, 3, "stop")  # type: ignore[attr-defined]
