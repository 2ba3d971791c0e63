"""ModelManager: the engines of several loaded models, loaded by name, kept within a budget.

Each loaded model is one LocalTarget (one Engine, one engine thread, its own continuous
batch). Whoever uses a model holds a Lease on it (`acquire`, which loads it first when it
is not loaded: the caller waits); a model with a lease or a running request is busy and is
never evicted. Before a load the model's need is estimated from its file (budget.need_of);
when the loaded models' needs and it exceed the budget, or `max_models` are loaded, the
idle unpinned models are unloaded least recently used first; if that is not enough the load
is refused (NoRoom: the estimate and the busy or pinned models to unload). A model idle for
its TTL (`ttl_s`, per model, set at a load or by a request) is unloaded. Loading runs in a
thread of its own and unloading stops only the model's own engine, so a reply running on
another model goes on untouched.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING, Any

from engine.public import (
    MemoryNeed,
    format_bytes,
    give_back_freed_memory,
    host_available_bytes,
)

from ..backend.local_target import LocalTarget, load_target
from ..daemon_thread import in_daemon_thread
from ..events import Event
from ..load_progress import progress_on_loop, takes_progress
from ..process_memory import resident_bytes
from .budget import HeldOutside, default_budget_bytes, need_of
from .catalog import Catalog
from .errors import NoRoom

if TYPE_CHECKING:
    from ..models.entry import ModelEntry

log = logging.getLogger(__name__)

# source -> a LocalTarget not started yet (blocking: run on a loading thread); one that
# takes a `progress=` keyword gets the load's (stage, fraction) reports
Loader = Callable[..., "LocalTarget"]
POLL_S = 0.05  # how often an unload looks whether the model's replies ended
UNSET: Any = object()  # `acquire(ttl_s=UNSET)`: keep the model's TTL as it is


class ModelState(StrEnum):
    AVAILABLE = "available"  # in the catalog, not loaded
    LOADING = "loading"
    LOADED = "loaded"
    UNLOADING = "unloading"  # waiting for its replies, or stopping


@dataclass(frozen=True)
class ModelInfo:
    """One model as `ps` and /v1/models show it."""

    name: str
    source: str
    state: ModelState
    need_bytes: int  # the estimate from the file
    need: str  # the estimate in words (weights, packed copy, KV budget)
    pinned: bool = False
    ttl_s: float | None = None  # unloaded after this long idle (None: only to make room)
    idle_s: float | None = None  # since its last use (None: busy, or not loaded)
    running: int = 0  # requests on it not ended
    resident_growth_bytes: int | None = None  # the process's RSS growth while it loaded
    progress: float | None = None  # while loading: the share loaded, as its loader says

    def as_json(self) -> dict[str, Any]:
        return {"id": self.name, "source": self.source, "state": self.state.value,
                "estimate_bytes": self.need_bytes, "estimate": self.need,
                "pinned": self.pinned, "ttl": self.ttl_s, "idle_s": self.idle_s,
                "running": self.running, "resident_growth_bytes": self.resident_growth_bytes,
                "progress": self.progress}


class _Hosted:
    """A model loading, loaded or unloading."""

    def __init__(self, entry: ModelEntry, need: MemoryNeed, ttl_s: float | None) -> None:
        self.entry = entry
        self.need = need
        self.target: LocalTarget | None = None
        self.state = ModelState.LOADING
        self.pinned = False
        self.ttl_s = ttl_s
        self.last_used = time.monotonic()
        self.leases = 0
        self.ready = asyncio.Event()  # loaded, or the load failed (`error`)
        self.gone = asyncio.Event()  # unloaded (or never loaded)
        self.error: BaseException | None = None
        self.rss_growth: int | None = None
        self.progress: float | None = None  # while loading, as the loader reports
        self.task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.entry.name

    def running(self) -> int:
        return len(self.target.live()) if self.target is not None else 0

    def busy(self) -> bool:
        return self.leases > 0 or self.running() > 0

    def kept(self) -> bool:
        """Not evicted nor unloaded by its TTL: busy, or drafting for another loaded model
        (its weights would stay in memory); an explicit unload still goes on."""
        return self.busy() or (self.target is not None and self.target.lends_draft)


class Lease:
    """A model held in use (`target`): not evicted, and not unloaded by its TTL, until
    `release()` (or the end of an `async with`)."""

    def __init__(self, manager: ModelManager, hosted: _Hosted) -> None:
        self._manager = manager
        self._hosted: _Hosted | None = hosted
        assert hosted.target is not None
        self.target: LocalTarget = hosted.target
        self.name = hosted.name

    def release(self) -> None:
        hosted, self._hosted = self._hosted, None
        if hosted is not None:
            hosted.leases -= 1
            hosted.last_used = time.monotonic()

    async def __aenter__(self) -> LocalTarget:
        return self.target

    async def __aexit__(self, *exc: object) -> None:
        self.release()


class ModelManager:
    """The loaded models (`models()`, `running()`), loaded and unloaded by name.

    `budget_bytes`: what the loaded models' estimates may add up to (default: a share of
    the machine's free memory, budget.default_budget_bytes); `max_models`: how many may be
    loaded at once (None: as many as fit); `kv_budget_bytes`: each engine's KV budget
    (None: the engine's default, as in the estimate); `default_ttl_s`: a model's TTL unless
    its load or a request sets one. `outside()`: the models loaded beside these that the
    manager does not own (the window's default model, set by the bridge): counted in the
    budget, never evicted. Events: `changed(name, state)`, `load_progress(name, stage,
    fraction)` while a model loads (at most once a percent)."""

    def __init__(self, catalog: Catalog, loader: Loader | None = None, *,
                 budget_bytes: int | None = None, max_models: int | None = None,
                 kv_budget_bytes: int | None = None, default_ttl_s: float | None = None,
                 reap_interval_s: float = 0.5, **engine_settings: Any) -> None:
        if loader is None:
            if kv_budget_bytes is not None:
                engine_settings["kv_budget_bytes"] = kv_budget_bytes
            loader = _default_loader(engine_settings)
        self.catalog = catalog
        self._loader = loader
        self.budget_bytes = budget_bytes or default_budget_bytes()
        self.max_models = max_models
        self.default_ttl_s = default_ttl_s
        self._kv_budget = kv_budget_bytes
        self._reap_interval = reap_interval_s
        self._hosted: dict[str, _Hosted] = {}
        self.outside: Callable[[], Sequence[HeldOutside]] = tuple
        self._room = asyncio.Lock()  # one load plans and loads at a time
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False
        self.changed = Event()
        self.load_progress = Event()

    # -- using a model ------------------------------------------------------------------
    async def acquire(self, name: str, *, ttl_s: float | None = UNSET,
                      pin: bool | None = None) -> Lease:
        """A lease on model `name` (library name, alias or path), loading it first if it is
        not loaded (waits for the load). UnknownModel, NoRoom, or the loader's error."""
        entry = self.catalog.find(name)
        while True:
            if self._closed:
                raise RuntimeError("the model manager is closed")
            hosted = self._hosted.get(entry.name)
            if hosted is None:
                hosted = self._start_load(entry, ttl_s)
            if hosted.state is ModelState.LOADING:
                await hosted.ready.wait()
                if hosted.error is not None:
                    raise hosted.error
                continue
            if hosted.state is ModelState.UNLOADING:
                await hosted.gone.wait()
                continue
            hosted.leases += 1
            hosted.last_used = time.monotonic()
            if ttl_s is not UNSET:
                hosted.ttl_s = ttl_s
            if pin is not None:
                hosted.pinned = pin
            return Lease(self, hosted)

    async def load(self, name: str, *, ttl_s: float | None = UNSET,
                   pin: bool | None = None) -> ModelInfo:
        """Load `name` (no-op if loaded) and set its TTL and pin where given."""
        lease = await self.acquire(name, ttl_s=ttl_s, pin=pin)
        lease.release()
        return self._info(self._hosted[lease.name])

    async def unload(self, name: str, *, cancel: bool = False,
                     timeout_s: float | None = None) -> bool:
        """Unload `name`: its running replies finish first (or, with `cancel`, are
        cancelled; after `timeout_s` of waiting the rest are). False if it was not loaded."""
        hosted = self._hosted.get(name) or self._hosted.get(self.catalog.find(name).name)
        if hosted is None:
            return False
        if hosted.state is ModelState.LOADING:
            await hosted.ready.wait()
            if hosted.error is not None:
                return False
        if hosted.state is ModelState.UNLOADING:
            await hosted.gone.wait()
            return True
        # a task of its own: a caller that leaves (an HTTP client gone) does not leave the
        # model half-unloaded
        await asyncio.shield(asyncio.get_running_loop().create_task(
            self._stop(hosted, cancel=cancel, timeout_s=timeout_s)))
        return True

    def estimate(self, name: str) -> MemoryNeed:
        """What `name` would take once loaded, from its file (UnknownModel if not found)."""
        return need_of(self.catalog.find(name), self._kv_budget)

    # -- what is loaded -----------------------------------------------------------------
    def running(self) -> list[ModelInfo]:
        """The models loading, loaded or unloading, in the order they came."""
        return [self._info(h) for h in self._hosted.values()]

    def models(self) -> list[ModelInfo]:
        """Every model: those hosted, then the catalog's others (available)."""
        out = self.running()
        for entry in self.catalog.available():
            if entry.name not in self._hosted:
                need = need_of(entry, self._kv_budget)
                out.append(ModelInfo(entry.name, entry.source, ModelState.AVAILABLE,
                                     need.total, need.describe(), ttl_s=self.default_ttl_s))
        return out

    def targets(self) -> dict[str, LocalTarget]:
        """Each loaded model's LocalTarget by name (/metrics, the stats panel)."""
        return {h.name: h.target for h in self._hosted.values()
                if h.state is ModelState.LOADED and h.target is not None}

    def used_bytes(self) -> int:
        """The estimates of the models loading, loaded or unloading, and of those held
        outside (the window's default model), added up."""
        return sum(h.need.total for h in [*self._hosted.values(), *self.outside()])

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Start unloading models idle past their TTL (needs the running loop)."""
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def close(self, timeout_s: float = 5.0) -> None:
        """Unload everything (running replies cancelled) and stop the TTL checks."""
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        for hosted in list(self._hosted.values()):
            if hosted.task is not None and not hosted.ready.is_set():
                await hosted.ready.wait()
            if hosted.state is ModelState.LOADED:
                await self._stop(hosted, cancel=True, timeout_s=timeout_s)
            elif hosted.state is ModelState.UNLOADING:  # an unload waiting: cut it short
                for _tag, stream in hosted.target.live() if hosted.target is not None else ():
                    stream.cancel()
                await hosted.gone.wait()

    # -- inside -------------------------------------------------------------------------
    def _start_load(self, entry: ModelEntry, ttl_s: float | None) -> _Hosted:
        hosted = _Hosted(entry, need_of(entry, self._kv_budget),
                         self.default_ttl_s if ttl_s is UNSET else ttl_s)
        self._hosted[entry.name] = hosted
        # a task of its own: a caller that gives up waiting (a client that left) does not
        # cancel a load others may be waiting for
        hosted.task = asyncio.get_running_loop().create_task(self._load(hosted))
        self._emit(hosted)
        return hosted

    async def _load(self, hosted: _Hosted) -> None:
        try:
            async with self._room:
                for victim in self._make_room(hosted):
                    log.info("unloading '%s' (idle) to make room for '%s'", victim.name,
                             hosted.name)
                    await self._stop(victim)
                before = resident_bytes()
                loader = self._loader
                if takes_progress(loader):
                    loader = partial(loader, progress=progress_on_loop(
                        partial(self._on_progress, hosted)))
                target = await in_daemon_thread(loader, hosted.entry.source,
                                                "batchchat-fleet-load")
                await target.start()
                after = resident_bytes()
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
            hosted.error = exc
            hosted.state = ModelState.AVAILABLE
            if self._hosted.get(hosted.name) is hosted:
                del self._hosted[hosted.name]
            hosted.ready.set()
            hosted.gone.set()
            self._emit(hosted)
            if not isinstance(exc, Exception):
                raise
            return
        hosted.target = target
        hosted.progress = None
        hosted.rss_growth = after - before if before is not None and after is not None \
            else None
        hosted.state = ModelState.LOADED
        hosted.last_used = time.monotonic()
        hosted.ready.set()
        self._emit(hosted)
        if self._closed:
            await self._stop(hosted, cancel=True)

    def _on_progress(self, hosted: _Hosted, stage: str, fraction: float) -> None:
        if hosted.state is ModelState.LOADING:
            hosted.progress = fraction
            self.load_progress.emit(hosted.name, stage, fraction)

    def _make_room(self, hosted: _Hosted) -> list[_Hosted]:
        """The idle models to unload, least recently used first, so that `hosted` fits
        (marked UNLOADING at once: no one takes a lease on them meanwhile); NoRoom when
        even unloading every idle unpinned model is not enough."""
        others = [h for h in self._hosted.values() if h is not hosted]
        need = hosted.need.total
        held = list(self.outside())  # never evicted here: the window unloads its own
        used = sum(h.need.total for h in others) + sum(o.need.total for o in held)
        free = self.budget_bytes - used
        slots = (self.max_models - len(others)) if self.max_models else len(others) + 1
        idle = sorted((h for h in others if h.state is ModelState.LOADED and not h.pinned
                       and not h.kept()), key=lambda h: h.last_used)
        victims: list[_Hosted] = []
        for h in idle:
            if need <= free and slots >= 1:
                break
            victims.append(h)
            free += h.need.total
            slots += 1
        if need > free or slots < 1:
            stuck = [h.name for h in others if h not in victims] + [o.name for o in held]
            raise NoRoom(hosted.name, need, self.budget_bytes, self.budget_bytes - used,
                         stuck, hosted.need.describe())
        machine = host_available_bytes() + sum(h.need.total for h in victims)
        if need > machine:
            raise NoRoom(hosted.name, need, self.budget_bytes, self.budget_bytes - used,
                         [h.name for h in others if h not in victims],
                         f"{hosted.need.describe()}; the machine has "
                         f"{format_bytes(machine)} free")
        for h in victims:
            h.state = ModelState.UNLOADING
        return victims

    async def _stop(self, hosted: _Hosted, *, cancel: bool = False,
                    timeout_s: float | None = None) -> None:
        """Unload `hosted`: wait for its replies and leases (cancel its replies with
        `cancel`, or once `timeout_s` passed), then stop its engine."""
        hosted.state = ModelState.UNLOADING
        self._emit(hosted)
        target = hosted.target
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while hosted.busy():
            if cancel or (deadline is not None and time.monotonic() >= deadline):
                for _tag, stream in target.live() if target is not None else ():
                    stream.cancel()
                cancel = True
            await asyncio.sleep(POLL_S)
        hosted.target = None
        if target is not None:
            try:
                await target.shutdown(timeout=5.0)
            except TimeoutError:
                log.warning("the engine of '%s' did not stop within 5 s", hosted.name)
            del target
            gc.collect()  # the engine's arrays sit in reference cycles: free them now,
            give_back_freed_memory()  # and hand glibc's kept freed memory back at once
        hosted.state = ModelState.AVAILABLE
        if self._hosted.get(hosted.name) is hosted:
            del self._hosted[hosted.name]
        hosted.gone.set()
        self._emit(hosted)

    async def _reap(self) -> None:
        """Unload each unpinned model idle for longer than its TTL."""
        while True:
            await asyncio.sleep(self._reap_interval)
            now = time.monotonic()
            for hosted in list(self._hosted.values()):
                if hosted.state is not ModelState.LOADED:
                    continue
                if hosted.kept():  # its TTL counts from the end of its last reply
                    hosted.last_used = now
                elif (not hosted.pinned and hosted.ttl_s is not None
                      and now - hosted.last_used >= hosted.ttl_s):
                    log.info("unloading '%s': idle for its TTL (%.0f s)", hosted.name,
                             hosted.ttl_s)
                    try:
                        # shielded: close() cancels this loop, and an unload cut off
                        # midway left the model UNLOADING for good, close() waiting on it
                        await asyncio.shield(self._stop(hosted))
                    except Exception:  # noqa: BLE001 - the next model's TTL still counts
                        log.exception("unloading '%s' failed", hosted.name)

    def _info(self, h: _Hosted) -> ModelInfo:
        busy = h.busy()
        idle = None if busy or h.state is not ModelState.LOADED \
            else round(time.monotonic() - h.last_used, 3)
        return ModelInfo(h.name, h.entry.source, h.state, h.need.total, h.need.describe(),
                         h.pinned, h.ttl_s, idle, h.running(), h.rss_growth, h.progress)

    def _emit(self, hosted: _Hosted) -> None:
        self.changed.emit(hosted.name, hosted.state)


def _default_loader(settings: dict[str, Any]) -> Loader:
    # a draft model (`serve --speculative draft:PATH`) drafts only for the models that share
    # its tokenizer; the others load without it (n-gram drafts, said in their notes)
    settings = {"speculative_draft_optional": True, **settings}

    def load(source: str, progress: Callable[[str, float], None] | None = None) -> LocalTarget:
        return load_target(source, progress=progress, **settings)

    return load
