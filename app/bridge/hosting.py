"""Hosting the local model: the load state machine, the loading thread and model switching.

A load runs in a daemon thread; the model serving now keeps serving while the next one loads,
and is replaced only by a model that loaded. Events: `state_changed(state, message)`,
`load_progress(stage, fraction)` while a model loads, `load_failed(message)` when a load
failed (the state is then READY again if the previous model kept serving, else FAILED).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING

from ..backend.local_target import Loader, LocalTarget, default_loader
from ..daemon_thread import in_daemon_thread
from ..events import Event
from ..load_progress import progress_on_loop, takes_progress

if TYPE_CHECKING:
    from ..backend.local_target import Engine

log = logging.getLogger(__name__)


class BridgeState(StrEnum):
    EMPTY = "empty"  # nothing loaded yet
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"  # the last load failed; `message` says why
    STOPPED = "stopped"  # shut down for good


class ModelHost:
    """Owns the LocalTarget serving now (`target`, None when no model is loaded).

    `after_stop(stopped)` runs after each stop (`stopped`: a target was shut down): the
    bridge waits there for the stopped engine's last events and flushes them."""

    def __init__(self, loader: Loader | None,
                 after_stop: Callable[[bool], Awaitable[None]]) -> None:
        self.loader = loader or default_loader()
        self.state = BridgeState.EMPTY
        self.message = ""
        self.source: str | None = None  # the model serving now
        self.attempted: str | None = None  # the last model asked for
        self.description = ""
        self.notes: tuple[str, ...] = ()  # the loaded model's (LocalTarget.notes)
        self.target: LocalTarget | None = None
        self.progress: tuple[str, float] | None = None  # the load under way: stage, fraction
        self.load_error = ""  # why the last load failed ("" when it did not)
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop the engine serves
        self.state_changed = Event()
        self.load_progress = Event()
        self.load_failed = Event()
        self._after_stop = after_stop
        # while a switch waits for running replies: why new local requests are refused
        self.refusing = ""
        # run once the next model has loaded, before it replaces this one (app.bridge.switch:
        # replies started meanwhile finish first); False gives the loaded model up
        self.before_swap: Callable[[], Awaitable[bool]] | None = None

    async def load(self, source: str) -> bool:
        """Load `source` in a background thread; True when it is ready to serve.

        The model serving now keeps serving while the new one loads (state LOADING still
        takes requests), and after a failed load: it is replaced only by a model that
        loaded. (Both are in memory for that while.)"""
        if self.state in (BridgeState.LOADING, BridgeState.STOPPED):
            return False
        previous = self.target
        self.attempted = source
        self.load_error = ""
        self.progress = None
        self.set_state(BridgeState.LOADING, f"Loading {source} …")
        loader = self.loader
        if takes_progress(loader):
            loader = partial(loader, progress=progress_on_loop(partial(self._on_progress,
                                                                       source)))
        try:
            engine = await in_daemon_thread(loader, source, "batchchat-load")
        except Exception as exc:  # noqa: BLE001 - any loader failure is shown to the user
            log.warning("loading %s failed: %s", source, exc)
            self.progress = None
            if self.state == BridgeState.STOPPED:
                return False
            # the loader's errors usually start with the path already: say it once
            reason = str(exc)
            self.load_error = (f"Could not load {reason}" if reason.startswith(source)
                               else f"Could not load {source}: {reason}")
            if previous is not None and self.target is previous:
                self.set_state(BridgeState.READY, self.description)  # it still serves
            else:
                self.set_state(BridgeState.FAILED, f"Could not load the model: {exc}")
            self.load_failed.emit(self.load_error)
            return False
        self.progress = None
        if self.state != BridgeState.STOPPED and self.before_swap is not None \
                and not await self.before_swap():
            await engine.shutdown(timeout=1.0)  # given up: the model in use keeps serving
            if self.state != BridgeState.STOPPED:
                self.set_state(BridgeState.READY if self.target is not None
                               else BridgeState.EMPTY, self.description)
            return False
        if self.state == BridgeState.STOPPED:  # the window closed while we loaded
            await engine.shutdown(timeout=1.0)
            return False
        await self.use_engine(engine, source)
        return True

    def _on_progress(self, source: str, stage: str, fraction: float) -> None:
        if self.state == BridgeState.LOADING and self.attempted == source:
            self.progress = (stage, fraction)
            self.load_progress.emit(stage, fraction)

    async def use_engine(self, engine: Engine, source: str = "engine") -> None:
        """Serve with a ready Engine (tests, or after `load`)."""
        await self.stop_target()
        self.loop = asyncio.get_running_loop()
        target = LocalTarget(engine)
        await target.start()
        self.target = target
        self.source = source
        self.description = target.description or source
        self.notes = target.notes
        self.set_state(BridgeState.READY, self.description)

    async def stop_target(self, timeout: float = 3.0) -> None:
        target, self.target = self.target, None
        if target is not None:
            try:
                await target.shutdown(timeout=timeout)
            except TimeoutError:
                log.warning("engine did not stop within %.1f s", timeout)
        await self._after_stop(target is not None)

    def set_state(self, state: BridgeState, message: str = "") -> None:
        self.state, self.message = state, message
        self.state_changed.emit(state, message)

    def event_loop(self) -> asyncio.AbstractEventLoop:
        return self.loop or asyncio.get_event_loop()

    def not_ready_reason(self) -> str:
        if self.state == BridgeState.LOADING:
            return "The model is still loading; try again in a moment."
        if self.state == BridgeState.FAILED:
            return f"No model is loaded. {self.message}"
        if self.state == BridgeState.STOPPED:
            return "The engine is shut down."
        return "No model is loaded yet."
