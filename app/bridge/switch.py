"""Switching the local model without losing work: who runs on it, waiting for them or stopping them.

Qt-free; the window asks the question (ui/model_switch.py) and calls `ModelSwitch.switch`
with the answer. While a switch waits for running replies (before the load, and again once
the new model has loaded, for replies started while it loaded), new local requests are
refused: a chat send gets the reason (`ModelHost.refusing`), the API server answers 503
with Retry-After. A simulator run already going keeps submitting: its requests are running
replies, so the switch waits for the run's end (or "Stop them now"). Remote replies never
wait: they do not use the engine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import PurePath
from typing import TYPE_CHECKING

from ..events import Event
from ..models.names import model_name as hub_model_name
from .frames import FramePump
from .hosting import BridgeState, ModelHost

if TYPE_CHECKING:
    from ..backend.local_target import LocalTarget

SWITCHED = "switched"  # the finish reason of a reply a model switch stopped
SIMULATOR_TAG = "sim"  # app.simulator.run.TAG_PREFIX: "sim-<run>-<n>"
API_TAG = "api"  # app.server.app.ServerConfig.tag
POLL_S = 0.05


class Choice(StrEnum):
    """What the user chose for the replies running when a switch was asked for."""

    FINISH = "finish"  # let them finish, then load
    STOP = "stop"  # stop them (their text is kept), then load


@dataclass(frozen=True)
class Running:
    """Local requests not ended yet, by where they come from."""

    chats: Mapping[str, int] = field(default_factory=dict)  # tab tag -> its replies
    simulator: int = 0
    server: int = 0
    other: int = 0  # e.g. the terminal chat, tests

    @property
    def total(self) -> int:
        return sum(self.chats.values()) + self.simulator + self.server + self.other

    def places(self, titles: Mapping[str, str]) -> list[str]:
        """Where they run, e.g. ['2 in “Story”', '1 from the API server'] (titles: each
        open tab's title by its tag; compare columns are replies of their tab)."""
        out = []
        for tag, n in self.chats.items():
            title = titles.get(tag)
            out.append(f"{n} in “{title}”" if title is not None else f"{n} in a closed tab")
        if self.simulator:
            out.append(f"{self.simulator} from the load simulator")
        if self.server:
            out.append(f"{self.server} from the API server")
        if self.other:
            out.append(f"{self.other} other")
        return out

    def describe(self, titles: Mapping[str, str]) -> str:
        """'3 replies are running: 2 in “Story” and 1 from the API server.'"""
        n = self.total
        places = self.places(titles)
        where = ", ".join(places[:-1]) + f" and {places[-1]}" if len(places) > 1 \
            else "".join(places)
        verb = "reply is" if n == 1 else "replies are"
        return f"{n} {verb} running: {where}." if where else f"{n} {verb} running."


def running_on(host: ModelHost) -> Running:
    """The requests the model serving now has not ended (none without a model)."""
    return running_of(host.target)


def running_of(target: LocalTarget | None) -> Running:
    """The requests `target` has not ended, by where they come from (none without one)."""
    if target is None:
        return Running()
    chats: dict[str, int] = {}
    simulator = server = other = 0
    for tag, _stream in target.live():
        if tag is not None and tag.startswith("tab-"):
            chats[tag] = chats.get(tag, 0) + 1
        elif tag is not None and tag.startswith(f"{SIMULATOR_TAG}-"):
            simulator += 1
        elif tag == API_TAG:
            server += 1
        else:
            other += 1
    return Running(chats, simulator, server, other)


def model_name(source: str) -> str:
    """A source's short name: a path's last part, a repo id's name; a hub cache snapshot
    (the model library's hub models) by its repo id, not its commit hash."""
    if source == "bundled":
        return "the bundled model"
    if "models--" in source:
        return hub_model_name(source)
    return PurePath(source.rstrip("/")).name or source


@dataclass
class PendingSwitch:
    """A switch under way. `phase`: "waiting" (for running replies, before the load),
    "loading", or "swapping" (loaded; waiting for replies started while it loaded)."""

    source: str
    choice: Choice
    phase: str
    running: Running


class ModelSwitch:
    """Events: `changed()` whenever `pending` or its running count changes."""

    def __init__(self, host: ModelHost, frames: FramePump, poll_s: float = POLL_S) -> None:
        self._host = host
        self._frames = frames
        self.poll_s = poll_s
        self.pending: PendingSwitch | None = None
        self.changed = Event()
        self._cancelled = False
        host.before_swap = self.before_swap

    def running(self) -> Running:
        return running_on(self._host)

    async def switch(self, source: str, choice: Choice = Choice.FINISH) -> bool:
        """Load `source` once the running local replies are done (FINISH) or stopped (STOP);
        True when it serves. False at once if a load or a switch is already under way; False
        also if cancelled while waiting, if the app closes, or if the load failed (then the
        previous model keeps serving)."""
        host = self._host
        if self.pending is not None or host.state in (BridgeState.LOADING,
                                                      BridgeState.STOPPED):
            return False
        self._cancelled = False
        self.pending = PendingSwitch(source, choice, "waiting", self.running())
        try:
            if choice == Choice.STOP:
                self.stop_running()
            if not await self._wait_idle(
                    f"Switching to {model_name(source)}: waiting for the running replies to "
                    "finish first. Send again once it has loaded."):
                return False
            self.pending.phase = "loading"
            self.changed.emit()
            return await host.load(source)
        finally:
            self.pending = None
            self.changed.emit()

    def stop_running(self) -> int:
        """Stop every local request now (their text is kept; a chat's reply ends
        "switched"); how many were asked to stop."""
        target = self._host.target
        if target is None:
            return 0
        for gen in self._frames.active:  # the default model's (another model's go on)
            if gen.backend is None and gen.model is None and not gen.ended:
                gen.ended_by = SWITCHED
        live = target.live()
        for _tag, stream in live:
            stream.cancel()
        return len(live)

    def cancel(self) -> bool:
        """Give up the switch while it waits for replies (the model in use keeps serving);
        False if there is none waiting."""
        if self.pending is None or self.pending.phase == "loading":
            return False
        self._cancelled = True
        return True

    async def before_swap(self) -> bool:
        """The host's hook once the next model has loaded: replies started on the previous
        one meanwhile finish first. False: give the loaded model up (cancelled, closing)."""
        if self.pending is not None:
            self.pending.phase = "swapping"
        ready = await self._wait_idle("The new model has loaded; switching once the running "
                                      "replies finish. Send again in a moment.")
        if self.pending is not None and ready:
            self.pending.phase = "loading"
        return ready

    def _unflushed(self) -> bool:
        """A chat reply has ended in the engine but its tab has not shown the end yet (the
        next frame does): the load waits for that too, so the reply is whole first."""
        return any(g.backend is None and g.model is None and not g.is_finished
                   for g in self._frames.active)

    async def _wait_idle(self, refusing: str) -> bool:
        """Refuse new local requests until none runs; False if cancelled or stopping."""
        host = self._host
        running = self.running()
        if not running.total and not self._unflushed():
            return True
        host.refusing = refusing
        if self.pending is not None:
            self.pending.running = running
        self.changed.emit()
        try:
            while running.total or self._unflushed():
                if self._cancelled or host.state == BridgeState.STOPPED:
                    return False
                await asyncio.sleep(self.poll_s)
                now = self.running()
                if now != running:
                    running = now
                    if self.pending is not None:
                        self.pending.running = now
                    self.changed.emit()
            return True
        finally:
            host.refusing = ""
