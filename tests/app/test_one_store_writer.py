"""The history store has one writer, HistoryWriter: the API server's request stats, the stats
panel's snapshots, simulation runs and history imports are handed to it. The store is its
own: no public attribute of the writer, the app's context or the reader it hands out is a
store, and the reader has no write method (so every write is queued, retried and reported
the same way; an import is written at once, as before). The writer is the Workspace's own:
the rest of the app gets the narrow entries it hands out (app/history/entries.py), and no
public attribute of the context, the server, the simulator, the stats model (here) or the
window's parts (tests/ui/test_history_one_writer.py) reaches the writer, by type."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Iterator
from types import SimpleNamespace

from app.bridge import EngineBridge
from app.context import AppContext
from app.history.entries import ApiResponses, ChatEdits, HistoryRecords, HistoryUpkeep
from app.history.reader import HistoryReader
from app.history.writer import HistoryWriter
from app.server.in_app import AppServer
from app.settings import Settings
from app.simulator.config import SimConfig
from app.simulator.run import SimulationRun
from app.stats.model import StatsModel
from app.storage import SafeStore, Store
from app.workspace import Workspace
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
        ws = Workspace(EngineBridge(), Settings(tmp_path / "s.json"), writer)
        assert isinstance(ws.history_reader, HistoryReader)
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
    server = AppServer(SimpleNamespace(records=history, history_reader=NoWrites()))  # type: ignore[arg-type]
    stats = RequestStats("api-1", "api", "interactive", 0.01, 7, 0.05, 3, 0.2, 10.0, 0.3,
                         "stop", 0, cached_tokens=2)
    server._record(stats)
    [record] = history.records
    assert (record.request_id, record.prompt_tokens, record.cached_tokens,  # type: ignore[attr-defined]
            record.generated_tokens, record.finish_reason) == ("api-1", 7, 2, 3, "stop")  # type: ignore[attr-defined]


# -- the Workspace is the writer's one holder ---------------------------------------------
FORBIDDEN = (HistoryWriter, SafeStore, Store)


def handed_out(root: object, name: str, depth: int = 4) -> Iterator[str]:
    """The public paths from `root` (through the app's own objects, and the lists, dicts
    and tuples they keep) that reach the writer or its store: as a value, or as the object
    behind a bound method. Judged by type, whatever the attributes are called."""
    seen: set[int] = set()

    def walk(obj: object, path: str, left: int) -> Iterator[str]:
        if isinstance(obj, FORBIDDEN) or isinstance(getattr(obj, "__self__", None), FORBIDDEN):
            yield path
            return
        if left == 0 or id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, list | tuple | set | frozenset):
            for i, item in enumerate(obj):
                yield from walk(item, f"{path}[{i}]", left - 1)
            return
        if isinstance(obj, dict):
            for key, item in obj.items():
                yield from walk(item, f"{path}[{key!r}]", left - 1)
            return
        if not type(obj).__module__.startswith(("app.", "ui.")):
            return  # Qt's and the standard library's objects hold none of ours
        for attr in dir(obj):
            if attr.startswith("_"):
                continue
            try:
                value = getattr(obj, attr)
            except Exception:  # noqa: BLE001 - a property that cannot be read now hands nothing out
                continue
            yield from walk(value, f"{path}.{attr}", left - 1)

    yield from walk(root, name, depth)


def test_no_field_of_the_context_can_hold_the_writer():
    """The context's fields are typed so that none can hold the writer; the entries have
    slots, so nothing else can be hung on them."""
    for f in dataclasses.fields(AppContext):
        hint = typing.get_type_hints(AppContext)[f.name]
        kinds = [a for a in typing.get_args(hint) if isinstance(a, type)] or [hint]
        assert not any(isinstance(k, type) and issubclass(k, FORBIDDEN) for k in kinds), f.name
    for cls in (HistoryRecords, ChatEdits, HistoryUpkeep, ApiResponses):
        assert not hasattr(cls, "__dict__") or "__slots__" in vars(cls), cls  # no room for more
        assert all(n.startswith("_") or n in {"chats_changed", "status_changed"}
                   for n in cls.__slots__), cls.__slots__


def test_only_the_workspace_holds_the_writer(tmp_path):
    """A Workspace on a writer hands the context, the API server, the stats model and a
    simulation run only its narrow entries: none of their public attributes (nor the
    Workspace's own) reaches the writer or its store."""
    writer = HistoryWriter.open(tmp_path / "h.db")
    try:
        settings = Settings(tmp_path / "s.json")
        bridge = EngineBridge()
        ws = Workspace(bridge, settings, writer)
        ws.open()
        ctx = AppContext(settings, bridge)
        ctx.history_reader, ctx.records = ws.history_reader, ws.records
        ctx.api_responses = ws.api_responses
        assert isinstance(ctx.records, HistoryRecords)
        assert isinstance(ctx.api_responses, ApiResponses)
        assert isinstance(ws.chat_edits, ChatEdits) and isinstance(ws.upkeep, HistoryUpkeep)
        server = AppServer(ctx)
        stats = StatsModel(ctx)
        run = SimulationRun(bridge.streams, SimConfig(), ctx.records)
        for root, name in ((ctx, "ctx"), (server, "server"), (stats, "stats"), (run, "run"),
                           (ws, "workspace"), (ws.records, "records"),
                           (ws.chat_edits, "chat_edits"), (ws.upkeep, "upkeep"),
                           (ws.api_responses, "api_responses")):
            assert not list(handed_out(root, name)), list(handed_out(root, name))
    finally:
        ws.close_history()


def test_the_walk_finds_a_writer_handed_out(tmp_path):
    """The check above is not vacuous: a writer (or its bound method) on a public attribute
    of one of the app's objects, even a few steps down, is found."""
    writer = HistoryWriter.open(tmp_path / "h.db")
    try:
        settings = Settings(tmp_path / "s.json")
        ctx = AppContext(settings, EngineBridge())
        ctx.mcp.leak = [writer.save_sim_run]  # type: ignore[attr-defined]
        assert list(handed_out(ctx, "ctx")) == ["ctx.mcp.leak[0]"]
        ws = Workspace(EngineBridge(), settings, writer)
        ws.leak = {"w": writer}  # type: ignore[attr-defined]
        assert list(handed_out(ws, "workspace")) == ["workspace.leak['w']"]
    finally:
        writer.close()
