"""The history store has one writer, HistoryWriter: the API server's request stats, the stats
panel's snapshots, simulation runs and history imports are handed to it. The store is its
own: no public attribute of the writer, the app's context or the reader it hands out is a
store, and the reader has no write method (so every write is queued, retried and reported
the same way; an import is written at once, as before)."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

from app.context import AppContext
from app.history.reader import HistoryReader
from app.history.writer import HistoryWriter
from app.server.in_app import AppServer
from app.storage import SafeStore, Store
from engine.public import RequestStats


def write_methods() -> set[str]:
    """SafeStore's writes: the methods that queue a write."""
    return {name for name, fn in vars(SafeStore).items()
            if inspect.isfunction(fn) and "self._submit(" in inspect.getsource(fn)}


def test_history_writer_offers_every_write_the_app_makes():
    writes = write_methods()
    assert {"save_message", "record_request_stats", "add_stats_snapshot", "save_sim_run",
            "add_sim_results"} <= writes
    for name in ("record_request_stats", "add_stats_snapshot", "save_sim_run",
                 "add_sim_results", "delete_sim_run"):
        assert callable(getattr(HistoryWriter, name)), name


def test_the_reader_has_no_write_method(tmp_path):
    writes = write_methods() | {name for name in vars(Store) if not name.startswith(("_", "list",
                                "load", "get", "search", "read"))}
    public = {name for name in dir(HistoryReader) if not name.startswith("_")}
    assert not public & writes, public & writes
    writer = HistoryWriter.open(tmp_path / "h.db")
    try:
        assert isinstance(writer.reader, HistoryReader)
        assert not hasattr(writer.reader, "__dict__")  # slots: nothing to hang a store on
    finally:
        writer.close()


def test_no_public_attribute_hands_out_the_store(tmp_path):
    """The writer keeps the store private, and the context hands readers a HistoryReader."""
    writer = HistoryWriter.open(tmp_path / "h.db")
    try:
        for owner in (writer, writer.reader):
            for name in dir(owner):
                if name.startswith("_"):
                    continue
                value = getattr(owner, name)
                assert not isinstance(value, SafeStore | Store), f"{type(owner).__name__}.{name}"
        assert not hasattr(AppContext, "store")
        ctx = SimpleNamespace(history=writer)
        assert isinstance(AppContext.history_reader.fget(ctx), HistoryReader)  # type: ignore[attr-defined]
    finally:
        writer.close()


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
    server = AppServer(SimpleNamespace(history=history, history_reader=NoWrites()))  # type: ignore[arg-type]
    stats = RequestStats("api-1", "api", "interactive", 0.01, 7, 0.05, 3, 0.2, 10.0, 0.3,
                         "stop", 0, cached_tokens=2)
    server._record(stats)
    [record] = history.records
    assert (record.request_id, record.prompt_tokens, record.cached_tokens,  # type: ignore[attr-defined]
            record.generated_tokens, record.finish_reason) == ("api-1", 7, 2, 3, "stop")  # type: ignore[attr-defined]
