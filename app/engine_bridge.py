"""The app's one engine client: loads the model off the UI thread, submits, cancels, and
coalesces token deltas so views update at most once per frame however many requests stream.
The load simulator goes through it too (`streams`: the engine's own streams, uncoalesced).

Imports no Qt, and the engine (hence mlx) only lazily, so `ui` never pulls in mlx. It runs
on whatever asyncio loop is current (qasync's, in the app), so a frame is a
`loop.call_later(frame_s)`; views subscribe to plain `Event`s.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING, Any

from .events import Event
from .paths import kv_cache_dir
from .remote.backends import RemoteBackends, UnknownBackend

if TYPE_CHECKING:  # the engine (and mlx) is imported only when a model is used
    from engine import Engine, EngineConfig, EngineStats, Priority, RequestStream, SamplingParams

log = logging.getLogger(__name__)

# model source -> Engine, on a loading thread; one that takes a `progress=` keyword gets
# Engine.load's progress callback (stage, fraction)
Loader = Callable[..., "Engine"]
ProgressFn = Callable[[str, float], None]
WAIT_POLL_S = 0.1  # how often a reply with no token yet is told where it stands


class BridgeState(StrEnum):
    EMPTY = "empty"  # nothing loaded yet
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"  # the last load failed; `message` says why
    STOPPED = "stopped"  # shut down for good


class SubmitError(Exception):
    """A request the engine would not take; `kind` is rejected | queue_full | not_ready."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class ReplyStats:
    """What a view shows under a reply (a plain copy of the engine's RequestStats)."""

    generated_tokens: int
    prompt_tokens: int
    ttft_s: float | None
    tokens_per_s: float
    e2e_s: float
    finish_reason: str
    error: str | None = None
    cached_tokens: int = 0  # prompt tokens the engine reused from its prefix cache

    def summary(self) -> str:
        parts = [f"{self.generated_tokens} tokens"]
        if self.ttft_s is not None:
            parts.append(f"first token {self.ttft_s:.2f} s")
        if self.cached_tokens:
            parts.append(f"{self.cached_tokens} of {self.prompt_tokens} prompt tokens cached")
        parts.append(f"{self.tokens_per_s:.1f} tok/s")
        parts.append(self.finish_reason)
        return " · ".join(parts)


def default_loader(config: EngineConfig | None = None) -> Loader:
    def load(source: str, progress: ProgressFn | None = None) -> Engine:
        from engine import Engine, EngineConfig

        return Engine.load(source, config or EngineConfig(
            max_concurrent=16, kv_disk_dir=str(kv_cache_dir())), progress=progress)

    return load


def _takes_progress(loader: Loader) -> bool:
    try:
        params = inspect.signature(loader).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "progress" or p.kind == p.VAR_KEYWORD for p in params)


def check_params(params: Mapping[str, Any]) -> str | None:
    """None if the sampling settings are valid, else the reason (for the settings panel)."""
    from engine.sampling_params import SamplingParams

    try:
        SamplingParams.from_dict(params)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


class Generation:
    """One reply being generated. `delta(text)` fires at most once per frame with the text
    that arrived since the last one; `finished(generation)` fires once, after the last delta."""

    def __init__(self, stream: RequestStream, tag: str | None,
                 backend: str | None = None, answered_by: str = "") -> None:
        self.stream = stream
        self.tag = tag
        self.backend = backend  # None: the local engine, else a connection's name
        self.answered_by = answered_by  # "model" or "connection (model)", for the history
        self.delta = Event()
        self.finished = Event()
        self.waiting = Event()  # (RequestProgress | None) while it has no token yet
        # (generation) once it has ended, as `finished`, but kept by detach(): for what
        # outlives the view (the history records a reply cancelled by closing its tab)
        self.done = Event()
        self.progress: Any = None  # the engine's RequestProgress, until the first token
        self.shown = ""  # text already handed to `delta` listeners
        self.ended = False  # the stream ended (its finish may not be flushed yet)
        self.is_finished = False  # `finished` was emitted
        self._pending: list[str] = []

    @property
    def request_id(self) -> str:
        return self.stream.request_id

    @property
    def text(self) -> str:
        return self.stream.text

    @property
    def finish_reason(self) -> str | None:
        return self.stream.finish_reason

    @property
    def error(self) -> str | None:
        return self.stream.error

    @property
    def stats(self) -> ReplyStats | None:
        s = self.stream.stats
        if s is None:
            return None
        return ReplyStats(s.generated_tokens, s.prompt_tokens, s.ttft_s, s.tokens_per_s,
                          s.e2e_s, s.finish_reason, s.error, s.cached_tokens)

    @property
    def tokens(self) -> list[int]:
        """The generated token ids so far."""
        return list(self.stream.tokens)

    def cancel(self) -> None:
        self.stream.cancel()

    def detach(self) -> None:
        """Forget every listener (the view is going away)."""
        self.delta.disconnect()
        self.finished.disconnect()
        self.waiting.disconnect()

    def _flush(self) -> None:
        if self._pending:
            text = "".join(self._pending)
            self._pending.clear()
            self.shown += text
            self.delta.emit(text)
        if self.ended and not self.is_finished:
            self.is_finished = True
            self.finished.emit(self)
            self.done.emit(self)


class EngineBridge:
    """Owns the Engine. Events: `state_changed(state, message)`, `frame()` after each flush,
    `load_progress(stage, fraction)` while a model loads, `load_failed(message)` when a load
    failed (the state is then READY again if the previous model kept serving, else FAILED).
    """

    def __init__(self, loader: Loader | None = None, frame_s: float = 0.016) -> None:
        self.loader = loader or default_loader()
        self.streams = StreamClient(self)
        self.frame_s = frame_s
        self.state = BridgeState.EMPTY
        self.message = ""
        self.source: str | None = None  # the model serving now
        self.attempted: str | None = None  # the last model asked for
        self.description = ""
        self.engine: Engine | None = None
        self.state_changed = Event()
        self.frame = Event()
        self.load_progress = Event()
        self.load_failed = Event()
        self.progress: tuple[str, float] | None = None  # the load under way: stage, fraction
        self.load_error = ""  # why the last load failed ("" when it did not)
        self.num_flushes = 0
        self._active: dict[str, Generation] = {}
        self._dirty: dict[str, Generation] = {}
        self._flush_handle: asyncio.TimerHandle | None = None
        self._wait_handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the engine serves
        self._ends_wanted: asyncio.Future[None] | None = None  # see _local_ends
        # chats on OpenAI-compatible servers (app/remote); AppContext points it at settings
        self.remotes = RemoteBackends()

    # -- model lifecycle ----------------------------------------------------------------
    @property
    def is_ready(self) -> bool:
        return self.state == BridgeState.READY

    async def load(self, source: str) -> bool:
        """Load `source` in a background thread; True when it is ready to serve.

        The model serving now keeps serving while the new one loads (state LOADING still
        takes requests), and after a failed load: it is replaced only by a model that
        loaded. (Both are in memory for that while.)"""
        if self.state in (BridgeState.LOADING, BridgeState.STOPPED):
            return False
        previous = self.engine
        self.attempted = source
        self.load_error = ""
        self.progress = None
        self._set_state(BridgeState.LOADING, f"Loading {source} …")
        loader = self.loader
        if _takes_progress(loader):
            loader = partial(loader, progress=self._progress_from_thread(source))
        try:
            engine = await _in_thread(loader, source)
        except Exception as exc:  # noqa: BLE001 - any loader failure is shown to the user
            log.warning("loading %s failed: %s", source, exc)
            self.progress = None
            if self.state == BridgeState.STOPPED:
                return False
            # the loader's errors usually start with the path already: say it once
            reason = str(exc)
            self.load_error = (f"Could not load {reason}" if reason.startswith(source)
                               else f"Could not load {source}: {reason}")
            if previous is not None and self.engine is previous:
                self._set_state(BridgeState.READY, self.description)  # it still serves
            else:
                self._set_state(BridgeState.FAILED, f"Could not load the model: {exc}")
            self.load_failed.emit(self.load_error)
            return False
        self.progress = None
        if self.state == BridgeState.STOPPED:  # the window closed while we loaded
            await engine.shutdown(timeout=1.0)
            return False
        await self.use_engine(engine, source)
        return True

    def _progress_from_thread(self, source: str) -> ProgressFn:
        """A progress callback for the loading thread: hands (stage, fraction) to this loop,
        at most once per percent or stage (a loader may report thousands of steps)."""
        loop = asyncio.get_running_loop()
        sent: list[Any] = [None, -1.0]

        def report(stage: str, fraction: float) -> None:
            if stage == sent[0] and fraction < 1.0 and fraction - sent[1] < 0.01:
                return
            sent[:] = [stage, fraction]
            if not loop.is_closed():
                loop.call_soon_threadsafe(self._on_progress, source, stage, fraction)

        return report

    def _on_progress(self, source: str, stage: str, fraction: float) -> None:
        if self.state == BridgeState.LOADING and self.attempted == source:
            self.progress = (stage, fraction)
            self.load_progress.emit(stage, fraction)

    async def use_engine(self, engine: Engine, source: str = "engine") -> None:
        """Serve with a ready Engine (tests, or after `load`)."""
        await self._stop_engine()
        self._loop = asyncio.get_running_loop()
        await engine.start()
        self.engine = engine
        self.source = source
        self.description = engine.description or source
        self._set_state(BridgeState.READY, self.description)

    async def shutdown(self, timeout: float = 3.0) -> None:
        """End every request (finish reason "shutdown") and stop the engine thread."""
        self._set_state(BridgeState.STOPPED, "Shutting down …")
        await self.remotes.close()  # remote replies end "cancelled", their sessions close
        await self._stop_engine(timeout)

    async def _stop_engine(self, timeout: float = 3.0) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            try:
                await engine.shutdown(timeout=timeout)
            except TimeoutError:
                log.warning("engine did not stop within %.1f s", timeout)
            await self._local_ends(timeout=1.0)
        self._flush()
        if self._wait_handle is not None:
            self._wait_handle.cancel()
            self._wait_handle = None

    async def _local_ends(self, timeout: float) -> None:
        """Wait until every local reply has its final event (finish reason "shutdown"): the
        stopped engine's last events come by loop callbacks. Remote replies go on streaming
        across a model switch, so they are not waited for."""
        waiting = [g for g in self._active.values() if g.backend is None and not g.ended]
        if not waiting:
            return
        self._ends_wanted = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(self._ends_wanted, timeout)
        except TimeoutError:
            log.warning("%d replies got no final event from the stopped engine",
                        sum(not g.ended for g in waiting))
        finally:
            self._ends_wanted = None

    def _set_state(self, state: BridgeState, message: str = "") -> None:
        self.state, self.message = state, message
        self.state_changed.emit(state, message)

    # -- requests -----------------------------------------------------------------------
    def submit(self, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any],
               tag: str | None = None, backend: str | None = None) -> Generation:
        """Start a reply; raise SubmitError (with the engine's reason) if it is refused.
        `backend` names a saved connection (a RemoteStream), None the local engine."""
        if backend is not None:
            return self._submit_remote(messages, params, tag, backend)
        # while another model loads, the one loaded still serves
        if self.engine is None or self.state not in (BridgeState.READY, BridgeState.LOADING):
            raise SubmitError(self._not_ready_reason(), "not_ready")
        from engine import EngineStopped, QueueFullError, RequestRejected

        try:
            stream = self.engine.submit(messages=list(messages), params=dict(params),
                                        priority="interactive", tag=tag)
        except QueueFullError as exc:
            raise SubmitError(str(exc), "queue_full") from None
        except RequestRejected as exc:
            raise SubmitError(str(exc), "rejected") from None
        except EngineStopped as exc:
            raise SubmitError(str(exc), "not_ready") from None
        gen = Generation(stream, tag, answered_by=self.description)
        self._follow(gen)
        self._watch_waiting()
        return gen

    def _submit_remote(self, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any],
                       tag: str | None, backend: str) -> Generation:
        if self.state == BridgeState.STOPPED:
            raise SubmitError("The app is shutting down.", "not_ready")
        try:
            client = self.remotes.client(backend, self._event_loop())
            # Remote messages carry no token ids: those are the local engine's own.
            plain = [{k: v for k, v in m.items() if k != "token_ids"} for m in messages]
            stream = client.submit(plain, params=dict(params), tag=tag)
        except UnknownBackend as exc:
            raise SubmitError(str(exc), "not_ready") from None
        except ValueError as exc:  # no model chosen, or settings the client refuses
            raise SubmitError(str(exc), "rejected") from None
        gen = Generation(stream, tag, backend=backend, answered_by=client.description)
        self._follow(gen)
        return gen

    def _follow(self, gen: Generation) -> None:
        """Pump its events into per-frame deltas (local and remote streams alike)."""
        self._active[gen.request_id] = gen
        # A call per event batch the engine delivers, not a task woken per stream per tick
        # (16 streams were 16 loop callbacks per tick, each a Qt timer event on the UI thread)
        gen.stream.listen(lambda event, gen=gen: self._on_event(gen, event))

    @property
    def active(self) -> list[Generation]:
        return list(self._active.values())

    async def save_kv(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Save the KV the engine holds for this conversation to disk (it outlives a
        restart); how many tokens it holds (0: no model, nothing cached, or no disk store)."""
        if self.engine is None or self.state != BridgeState.READY:
            return 0
        return await self.engine.save_prefix(list(messages))

    def stats(self) -> EngineStats | None:
        return self.engine.stats() if self.engine is not None else None

    # -- concurrency limit (the load simulator sets it for a run) ----------------------------
    @property
    def max_concurrent(self) -> int | None:
        """How many requests the engine runs at once (None: no model)."""
        return self.engine.max_concurrent if self.engine is not None else None

    @property
    def max_concurrent_limit(self) -> int | None:
        """The highest `set_max_concurrent` accepts (None: no model)."""
        return self.engine.max_concurrent_limit if self.engine is not None else None

    def set_max_concurrent(self, n: int) -> None:
        """Change the limit (ValueError if out of range). Without a model there is nothing
        to change: the next one starts with its own limit."""
        if self.engine is not None:
            self.engine.set_max_concurrent(n)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop or asyncio.get_event_loop()

    def _not_ready_reason(self) -> str:
        if self.state == BridgeState.LOADING:
            return "The model is still loading; try again in a moment."
        if self.state == BridgeState.FAILED:
            return f"No model is loaded. {self.message}"
        if self.state == BridgeState.STOPPED:
            return "The engine is shut down."
        return "No model is loaded yet."

    def _on_event(self, gen: Generation, event: Any) -> None:
        if event.text:
            gen._pending.append(event.text)
        if event.finish_reason is not None:
            gen.ended = True
            wanted = self._ends_wanted
            if wanted is not None and not wanted.done() and all(
                    g.ended for g in self._active.values() if g.backend is None):
                wanted.set_result(None)
        self._mark(gen)

    # -- waiting feedback ---------------------------------------------------------------
    def _watch_waiting(self) -> None:
        if self._wait_handle is None:
            self._wait_handle = self._event_loop().call_later(WAIT_POLL_S, self._poll_waiting)

    def _poll_waiting(self) -> None:
        """While a reply has no text yet, tell it where it stands (queue position, prompt
        read so far): one cheap engine read-out for all of them, a few times a second."""
        self._wait_handle = None
        waiting = [g for g in self._active.values()
                   if not g.shown and not g._pending and not g.ended and g.backend is None]
        if not waiting or self.engine is None:
            return
        progress = self.engine.request_progress()
        for gen in waiting:
            now = progress.get(gen.request_id)
            if now != gen.progress:
                gen.progress = now
                gen.waiting.emit(now)
        self._watch_waiting()

    # -- per-frame coalescing -----------------------------------------------------------
    def _mark(self, gen: Generation) -> None:
        self._dirty[gen.request_id] = gen
        if self._flush_handle is None:
            self._flush_handle = self._event_loop().call_later(self.frame_s, self._flush)

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        dirty, self._dirty = self._dirty, {}
        if not dirty:
            return
        self.num_flushes += 1
        for gen in dirty.values():
            gen._flush()
            if gen.is_finished:
                self._active.pop(gen.request_id, None)
        self.frame.emit()


class StreamClient:
    """Requests to the engine the bridge serves, answered with the engine's own streams (no
    per-frame coalescing): the load simulator times every token. Shaped as the Engine is for
    app.simulator.workload (`submit`, `max_concurrent`, `set_max_concurrent`)."""

    def __init__(self, bridge: EngineBridge) -> None:
        self._bridge = bridge

    @property
    def description(self) -> str:
        """What a simulator summary names as its target (compared with servers' runs)."""
        return f"local engine ({self._bridge.description or 'no model'})"

    def submit(self, messages: Sequence[Mapping[str, Any]], *,
               params: SamplingParams | Mapping[str, Any] | None = None,
               priority: Priority | str = "interactive",
               tag: str | None = None) -> RequestStream:
        """Refusals raise the engine's errors (EngineStopped while no model is serving)."""
        return self._engine().submit(messages=messages, params=params, priority=priority,
                                     tag=tag)

    @property
    def max_concurrent(self) -> int:
        return self._engine().max_concurrent

    def set_max_concurrent(self, n: int) -> None:
        self._bridge.set_max_concurrent(n)

    def _engine(self) -> Engine:
        engine = self._bridge.engine
        if engine is None:
            from engine import EngineStopped

            raise EngineStopped(self._bridge._not_ready_reason())
        return engine


async def _in_thread(fn: Callable[[str], Engine], arg: str) -> Engine:
    """Run a blocking call in a daemon thread (so a slow load never blocks exiting)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Engine] = loop.create_future()

    def settle(result: Engine | None, exc: BaseException | None) -> None:
        if future.done():
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result, exc = fn(arg), None
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            result, exc = None, e
        if not loop.is_closed():
            loop.call_soon_threadsafe(settle, result, exc)

    threading.Thread(target=run, name="batchchat-load", daemon=True).start()
    return await future
