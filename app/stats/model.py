"""What the stats panel shows, read from the engine's own read-outs (no Qt, no mlx).

Every number comes from the bridge's local model (`bridge.local`, an app.bridge LocalTarget;
or one of the models loaded beside it, `StatsModel.chosen`):
its `stats()`, `telemetry()`, `request_rows()` or `finished_requests()`; snapshots are saved
through the history's one writer. Nothing here counts tokens or requests itself, so the panel
cannot drift from the engine. `poll()` runs every 0.5 s (cheap: a few copies under the
engine's stats lock) and keeps a bounded history for the charts; `read_details()` (the
latency percentiles and the request table) runs only while the panel is on screen.

Definitions (also in the panel's tooltips and docs/app.md):
* TTFT: submit -> first token of the requests in `finished_requests()` (the last 1024).
* ITL (inter-token latency): the engine has no per-token timestamps, but every sequence in
  a decode tick gets exactly one token at the end of that tick, and its previous token came
  at the end of the tick before. So each decode tick in the telemetry (the last 1024 ticks)
  contributes the time since the previous tick ended, once per sequence it decoded.
"""

from __future__ import annotations

import logging
import math
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.process_memory import resident_bytes
from app.simulator.workload import percentile

from .memory import MemoryFigures, memory_figures

if TYPE_CHECKING:
    from engine.public import EngineStats, TickRecord

    from ..backend import LocalTarget
    from ..context import AppContext

log = logging.getLogger(__name__)

INTERVAL_S = 0.5  # poll period
HISTORY_S = 300.0  # chart history
SNAPSHOT_EVERY_S = 10.0  # stats snapshots to the history store
FINISHED_ROWS = 200  # finished requests shown in the table (newest first)
SIMULATION = "simulation"
API = "api"  # requests through the OpenAI-compatible server (app/server)
# An idle engine records no ticks, so the first tick after a pause (new requests only: while
# anything decodes the engine never waits this long between ticks) must not count the pause.
IDLE_GAP_S = 0.25


@dataclass(frozen=True, slots=True)
class Sample:
    """One chart point. Per-tick values average the ticks since the previous sample."""

    t: float  # perf_counter
    tokens_per_s: float  # the engine's windowed aggregate
    batch_size: float  # mean decode rows per decoding tick (the current size when idle)
    queued: int
    step_ms: float  # mean tick time; NaN when no tick ran (a gap in the chart)
    budget: int  # the adaptive token budget


@dataclass(frozen=True, slots=True)
class ModelLoaded:
    """A model the panel started reading: its figures count from `t` (perf_counter) on."""

    t: float
    name: str  # the engine's description
    at: str  # the wall-clock time, "14:02"


@dataclass(frozen=True, slots=True)
class Latency:
    """Percentiles in seconds over `count` values (all 0 when count is 0)."""

    p50: float = 0.0
    p90: float = 0.0
    p99: float = 0.0
    count: int = 0


@dataclass(frozen=True, slots=True)
class TableRow:
    request_id: str
    source: str  # the chat's title ("… (closed)" once its tab closed), "api" or "simulation"
    state: str  # queued | prefilling | generating | finished | cancelled
    prompt_tokens: int
    generated_tokens: int
    ttft_s: float | None
    tokens_per_s: float
    finish_reason: str | None = None
    cached_tokens: int = 0  # prompt tokens reused from the prefix cache (set at admission)


def snapshot_data(stats: EngineStats) -> dict[str, Any]:
    """What a history snapshot keeps: every field, and the derived figures the panel shows
    (properties, which `to_dict` leaves out)."""
    return stats.to_dict() | {"prefix_hit_rate": stats.prefix_hit_rate,
                              "kv_used_bytes": stats.kv_used_bytes}


def latency(values: Sequence[float]) -> Latency:
    ordered = sorted(values)
    return Latency(percentile(ordered, 50), percentile(ordered, 90), percentile(ordered, 99),
                   len(ordered))


def weighted_latency(pairs: Sequence[tuple[float, int]]) -> Latency:
    """Percentiles of values repeated by weight (as `percentile` of the expanded list)."""
    ordered = sorted(p for p in pairs if p[1] > 0)
    cum: list[int] = []
    total = 0
    for _, w in ordered:
        total += w
        cum.append(total)
    if not total:
        return Latency()

    def at(k: int) -> float:
        return ordered[bisect_right(cum, k)][0]

    def pct(q: float) -> float:
        pos = (total - 1) * q / 100.0
        lo = int(pos)
        hi = min(lo + 1, total - 1)
        return at(lo) + (at(hi) - at(lo)) * (pos - lo)

    return Latency(pct(50), pct(90), pct(99), total)


def itl_gaps(ticks: Sequence[TickRecord]) -> list[tuple[float, int]]:
    """(gap since the previous tick ended, decode rows) for each decode tick; its own time
    for a tick whose predecessor is gone or that started after the engine sat idle."""
    out = []
    for i, rec in enumerate(ticks):
        if rec.decode_rows <= 0:
            continue
        prev = ticks[i - 1] if i else None
        gap = rec.step_s
        if prev is not None and prev.index == rec.index - 1 \
                and rec.t - rec.step_s - prev.t < IDLE_GAP_S:
            gap = rec.t - prev.t
        out.append((gap, rec.decode_rows))
    return out


def source_name(tag: str | None, titles: Mapping[str, str]) -> str:
    """A request's source for the table: its tab's title, else "closed tab", "api" or
    "simulation"."""
    if tag is not None and tag in titles:
        return titles[tag]
    if tag == API:
        return API
    if tag is not None and tag.startswith("tab-"):
        return "closed tab"
    return SIMULATION


class StatsModel:
    """Polls the engine the bridge serves with, or (`chosen`, issue #50) one of the models
    loaded beside it. When the model changes, the engine's figures start again from zero:
    the charts keep their history and `loaded` says when each model came (the panel names
    it and marks the charts)."""

    def __init__(self, ctx: AppContext, history_s: float = HISTORY_S,
                 snapshot_every_s: float = SNAPSHOT_EVERY_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.ctx = ctx
        self.history_s = history_s
        self.snapshot_every_s = snapshot_every_s
        self.clock = clock
        self.samples: deque[Sample] = deque(maxlen=int(history_s / INTERVAL_S) + 8)
        self.stats: EngineStats | None = None
        self.ttft = Latency()
        self.itl = Latency()
        self.rows: list[TableRow] = []
        self.memory: MemoryFigures | None = None
        self.snapshots = 0
        self.loaded: list[ModelLoaded] = []  # the models read, oldest first (the last: now)
        self._engine: LocalTarget | None = None
        self._ticks: list[TickRecord] = []
        self._last_index = -1
        self._last_snapshot: float | None = None
        # a model loaded beside the default one whose figures are read (None: the default;
        # back to it once that model is unloaded)
        self.chosen: str | None = None

    @property
    def engine(self) -> LocalTarget | None:
        return self._engine

    def choices(self) -> list[str]:
        """The models loaded beside the default one, by name (the panel's chooser)."""
        fleet = self.ctx.bridge.fleet
        return list(fleet.targets()) if fleet is not None else []

    def _target(self) -> LocalTarget | None:
        if self.chosen is not None:
            fleet = self.ctx.bridge.fleet
            target = fleet.targets().get(self.chosen) if fleet is not None else None
            if target is not None:
                return target
            self.chosen = None  # unloaded: the default model's figures again
        return self.ctx.bridge.local

    def poll(self) -> EngineStats | None:
        """Read the engine's stats and new ticks; add a chart sample; maybe snapshot."""
        engine = self._target()
        if engine is not self._engine:
            self._reset(engine)
        if engine is None:
            return None
        now = self.clock()
        stats = engine.stats()
        ticks = engine.telemetry()
        new = [r for r in ticks if r.index > self._last_index]
        if new:
            self._last_index = new[-1].index
        rows = [r.decode_rows for r in new if r.decode_rows]
        self.samples.append(Sample(
            t=now,
            tokens_per_s=stats.tokens_per_s,
            batch_size=sum(rows) / len(rows) if rows else float(stats.batch_size),
            queued=stats.queued,
            step_ms=1000 * sum(r.step_s for r in new) / len(new) if new else math.nan,
            budget=stats.budget,
        ))
        while self.samples and self.samples[0].t < now - self.history_s:
            self.samples.popleft()
        self.stats, self._ticks = stats, ticks
        self._maybe_snapshot(now, stats)
        return stats

    def read_details(self, titles: Mapping[str, str]) -> None:
        """Latency percentiles and the request table (live rows, then the newest finished)."""
        engine = self._engine
        if engine is None:
            self.ttft, self.itl, self.rows, self.memory = Latency(), Latency(), [], None
            return
        finished = engine.finished_requests()
        live = engine.request_rows()
        self.ttft = latency([s.ttft_s for s in finished if s.ttft_s is not None])
        self.itl = weighted_latency(itl_gaps(self._ticks))
        self.memory = (memory_figures(self.stats, resident_bytes(), engine.memory_bound())
                       if self.stats is not None else None)
        rows = [TableRow(r.request_id, source_name(r.tag, titles), r.state, r.prompt_tokens,
                         r.generated_tokens, r.ttft_s, r.tokens_per_s,
                         cached_tokens=r.cached_tokens) for r in live]
        seen = {r.request_id for r in live}
        for s in reversed(finished):
            if len(rows) >= len(live) + FINISHED_ROWS:
                break
            if s.request_id not in seen:  # a stopped reply, or its tab closed under it
                state = "cancelled" if s.finish_reason == "cancelled" else "finished"
                rows.append(TableRow(s.request_id, source_name(s.tag, titles), state,
                                     s.prompt_tokens, s.generated_tokens, s.ttft_s,
                                     s.tokens_per_s, s.finish_reason, s.cached_tokens))
        self.rows = rows

    @property
    def model(self) -> ModelLoaded | None:
        """The model the figures are of (None without one)."""
        return self.loaded[-1] if self._engine is not None and self.loaded else None

    def _reset(self, engine: LocalTarget | None) -> None:
        """Another engine (or none): its own figures from now; the chart samples stay."""
        self._engine = engine
        if engine is not None:
            now = self.clock()
            self.loaded = [m for m in self.loaded if m.t >= now - self.history_s][-8:]
            self.loaded.append(ModelLoaded(now, engine.description,
                                           datetime.now().strftime("%H:%M")))
        self.stats = None
        self._ticks = []
        self._last_index = -1
        self.ttft, self.itl, self.rows, self.memory = Latency(), Latency(), [], None

    def _maybe_snapshot(self, now: float, stats: EngineStats) -> None:
        history = self.ctx.records
        if history is None:
            return
        if self._last_snapshot is not None and now - self._last_snapshot < self.snapshot_every_s:
            return
        self._last_snapshot = now
        try:
            from ..storage.records import StatsSnapshot

            data = snapshot_data(stats)
            if self.loaded:  # which model these figures are of (they restart with each)
                data["model"] = self.loaded[-1].name
            history.add_stats_snapshot(StatsSnapshot(data=data))
            self.snapshots += 1
        except Exception:  # noqa: BLE001 - a failed snapshot must never stop the panel
            log.exception("could not save a stats snapshot")
