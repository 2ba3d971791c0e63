"""StatsModel on a fake engine: ITL definition, bounded history, snapshots, table rows."""

from __future__ import annotations

import math
from types import SimpleNamespace

from app.simulator.workload import percentile
from app.stats.model import (
    StatsModel,
    itl_gaps,
    latency,
    source_name,
    weighted_latency,
)
from engine.stats import EngineStats, RequestRow, RequestStats, TickRecord


def tick(index: int, t: float, rows: int, step: float = 0.01) -> TickRecord:
    return TickRecord(index, t, rows, 0, 0, step, step, 64, rows, rows > 1)


def stats(**kw: object) -> EngineStats:
    base = dict(active=0, prefilling=0, decoding=0, queued=0, completed=0, cancelled=0,
                failed=0, total_generated_tokens=0, total_prompt_tokens=0, tokens_per_s=0.0,
                mean_batch_size=0.0, batch_size=0, budget=64, step_s=0.0, step_s_ewma=0.0,
                ticks=0, memory_bytes=0, peak_memory_bytes=0, uptime_s=0.0)
    base.update(kw)
    return EngineStats(**base)  # type: ignore[arg-type]


def finished(rid: str, tag: str | None, n: int, ttft: float, cached: int = 0) -> RequestStats:
    return RequestStats(rid, tag, "interactive", 0.0, 5, ttft, n, 1.0, n - 1.0, 1.0 + ttft,
                        "length", 0, cached_tokens=cached)


class FakeEngine:
    def __init__(self, description: str = "fake model") -> None:
        self.description = description
        self.ticks: list[TickRecord] = []
        self.done: list[RequestStats] = []
        self.live: list[RequestRow] = []
        self.s = stats()

    def stats(self) -> EngineStats:
        return self.s

    def telemetry(self, last: int | None = None) -> list[TickRecord]:
        return list(self.ticks)

    def finished_requests(self) -> list[RequestStats]:
        return list(self.done)

    def request_rows(self) -> list[RequestRow]:
        return list(self.live)

    def memory_bound(self) -> int | None:
        return None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class History:
    def __init__(self) -> None:
        self.snapshots: list[object] = []

    def add_stats_snapshot(self, snapshot: object) -> bool:
        self.snapshots.append(snapshot)
        return True


def make(engine: FakeEngine | None, history: object = None) -> tuple[StatsModel, Clock]:
    """A StatsModel on `engine` (the bridge's local target), saving snapshots to `history`
    (the history store's one writer)."""
    clock = Clock()
    ctx = SimpleNamespace(bridge=SimpleNamespace(local=engine), records=history)
    return StatsModel(ctx, history_s=10.0, clock=clock), clock  # type: ignore[arg-type]


def test_weighted_percentiles_equal_the_expanded_list() -> None:
    pairs = [(0.03, 2), (0.01, 5), (0.02, 1), (0.5, 1), (0.9, 0)]
    expanded = sorted(v for v, w in pairs for _ in range(w))
    lat = weighted_latency(pairs)
    assert lat.count == 9
    for q, got in ((50, lat.p50), (90, lat.p90), (99, lat.p99)):
        assert math.isclose(got, percentile(expanded, q))
    assert weighted_latency([]).count == 0
    assert latency([0.2, 0.1]).p50 == percentile([0.1, 0.2], 50)


def test_itl_is_the_gap_between_tick_ends_once_per_decoded_sequence() -> None:
    ticks = [tick(7, 1.00, 0, step=0.2), tick(8, 1.05, 3), tick(9, 1.08, 3), tick(11, 2.0, 2)]
    gaps = itl_gaps(ticks)
    # tick 8 follows tick 7 (a prefill tick); tick 11's predecessor is gone: its own step_s
    assert [(round(g, 3), n) for g, n in gaps] == [(0.05, 3), (0.03, 3), (0.01, 2)]
    # The engine sat idle 5 s before tick 13 (a new request's first tokens): not a gap
    # between tokens, so it counts its own time.
    after_idle = [tick(12, 1.0, 1), tick(13, 6.02, 1, step=0.02), tick(14, 6.05, 1)]
    assert [round(g, 3) for g, _ in itl_gaps(after_idle)] == [0.01, 0.02, 0.03]


def test_history_is_bounded_and_per_tick_values_average_new_ticks() -> None:
    engine = FakeEngine()
    model, clock = make(engine)
    engine.ticks = [tick(0, 1.0, 2, 0.01), tick(1, 1.1, 4, 0.03)]
    engine.s = stats(tokens_per_s=12.5, queued=3, batch_size=4, budget=96)
    model.poll()
    s = model.samples[-1]
    assert (s.tokens_per_s, s.queued, s.batch_size, s.budget) == (12.5, 3, 3.0, 96)
    assert math.isclose(s.step_ms, 20.0)
    clock.now += 0.5
    model.poll()  # no new tick: a gap in the step chart, the current batch size
    assert math.isnan(model.samples[-1].step_ms) and model.samples[-1].batch_size == 4
    for _ in range(100):
        clock.now += 0.5
        model.poll()
    assert len(model.samples) <= 21
    assert model.samples[0].t >= clock.now - 10.0


def test_table_rows_live_first_then_newest_finished_without_duplicates() -> None:
    engine = FakeEngine()
    model, _ = make(engine)
    engine.live = [RequestRow("b", "tab-2", "generating", 5, 3, 0.1, 9.0),
                   RequestRow("c", None, "queued", 7, 0, None, 0.0)]
    engine.done = [finished("a", "tab-1", 12, 0.2), finished("b", "tab-2", 3, 0.1),
                   finished("d", "tab-9", 4, 0.4)]
    model.poll()
    model.read_details({"tab-1": "Chat one", "tab-2": "Chat two"})
    got = [(r.request_id, r.source, r.state, r.generated_tokens) for r in model.rows]
    assert got == [("b", "Chat two", "generating", 3), ("c", "simulation", "queued", 0),
                   ("d", "closed tab", "finished", 4), ("a", "Chat one", "finished", 12)]
    assert model.ttft.count == 3 and math.isclose(model.ttft.p50, 0.2)
    assert source_name("sim-3", {}) == "simulation"


def test_cached_tokens_in_the_table_and_memory_lines_after_read_details() -> None:
    engine = FakeEngine()
    model, _ = make(engine)
    engine.live = [RequestRow("b", "tab-2", "generating", 5, 3, 0.1, 9.0),
                   RequestRow("e", None, "prefilling", 40, 0, None, 0.0, cached_tokens=32)]
    engine.done = [finished("a", "tab-1", 12, 0.2, cached=85)]
    engine.s = stats(kv_budget_bytes=2**30, kv_reserved_bytes=2**20, prefix_lookups=2,
                     prefix_hits=1, prefix_hit_tokens=85, prefix_lookup_tokens=170)
    assert model.memory is None
    model.poll()
    model.read_details({})
    assert [(r.request_id, r.cached_tokens) for r in model.rows] == [
        ("b", 0), ("e", 32), ("a", 85)]
    assert model.memory is not None
    assert (model.memory.hit_rate, model.memory.hits, model.memory.kv) == (
        "50% of tokens", "1 of 2", "1.0 MiB of 1.0 GiB")
    model.ctx.bridge.local = None
    model.poll()
    model.read_details({})
    assert model.memory is None and model.rows == []


def test_snapshots_carry_the_derived_memory_figures() -> None:
    engine, store = FakeEngine(), History()
    engine.s = stats(kv_reserved_bytes=10, prefix_cached_bytes=30, prefix_hit_tokens=1,
                     prefix_lookup_tokens=4, prefix_disk_files=2)
    model, _ = make(engine, store)
    model.poll()
    data = store.snapshots[0].data  # type: ignore[attr-defined]
    assert (data["kv_used_bytes"], data["prefix_hit_rate"]) == (40, 0.25)
    assert data["prefix_disk_files"] == 2 and data["kv_reserved_bytes"] == 10


def test_snapshots_every_ten_seconds_only_with_a_store() -> None:
    engine, store = FakeEngine(), History()
    model, clock = make(engine, store)
    for _ in range(45):  # 22 s
        model.poll()
        clock.now += 0.5
    assert len(store.snapshots) == 3
    assert store.snapshots[0].data["budget"] == 64  # type: ignore[attr-defined]
    assert store.snapshots[0].data["model"] == "fake model"  # type: ignore[attr-defined]
    bare, _ = make(engine, None)
    assert bare.poll() is not None and bare.snapshots == 0


def test_a_new_model_keeps_the_chart_history_and_is_named() -> None:
    """Issue #32: a model switch no longer zeroes the panel silently: the samples before it
    stay, and `loaded` says which model the figures are of from when."""
    first, store = FakeEngine("first model"), History()
    model, clock = make(first, store)
    for _ in range(4):
        model.poll()
        clock.now += 0.5
    assert [m.name for m in model.loaded] == ["first model"]
    assert model.model is not None and model.model.t == 100.0
    model.ctx.bridge.local = None  # between the two engines
    assert model.poll() is None and model.stats is None and model.model is None
    assert len(model.samples) == 4  # kept
    second = FakeEngine("second model")
    second.s = stats(completed=0, tokens_per_s=7.0)
    model.ctx.bridge.local = second
    clock.now += 0.5
    model.poll()
    assert len(model.samples) == 5 and model.samples[-1].tokens_per_s == 7.0
    assert [m.name for m in model.loaded] == ["first model", "second model"]
    assert model.model.name == "second model" and model.model.t == clock.now
    assert len(model.model.at) == 5 and model.model.at[2] == ":"  # "14:02"
    clock.now += 20
    model.poll()
    assert [s.data["model"] for s in store.snapshots] == [  # type: ignore[attr-defined]
        "first model", "second model"]


def test_a_failing_store_never_stops_polling() -> None:
    class Broken:
        def add_stats_snapshot(self, snapshot: object) -> bool:
            raise OSError("disk full")

    model, _ = make(FakeEngine(), Broken())
    assert model.poll() is not None


def test_snapshots_reach_the_real_history_store(tmp_path) -> None:
    from app.history.writer import HistoryWriter
    from app.storage import SafeStore

    store = SafeStore.open(tmp_path / "history.db")
    engine = FakeEngine()
    engine.s = stats(completed=4, tokens_per_s=9.5)
    model, _ = make(engine, HistoryWriter(store))
    model.poll()
    saved = store.reader.list_stats_snapshots()
    assert [s.data["completed"] for s in saved] == [4]
    assert saved[0].data["tokens_per_s"] == 9.5
