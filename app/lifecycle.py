"""The app's quit sequence in one place (Qt-free): what stops, in which order, and why.

1. the load simulator: its requests end "cancelled" before the engine goes;
2. the API server: so do its clients' requests, and its port is released;
3. the open chats' KV to disk, so their next turn after a restart reuses it;
4. the engine (replies still running end "shutdown");
5. the history, after the event loop has ended (`finish`): a last write of anything
   unsaved, set aside in a file when no one could be asked (SIGTERM, SIGHUP).

One step that fails is logged and the next still runs: the engine must stop and the
history be written whatever went wrong before them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from .bridge import EngineBridge
from .workspace import Workspace

log = logging.getLogger(__name__)

Stop = Callable[[], Awaitable[object]]
SIMULATOR_TIMEOUT_S = 3.0
ENGINE_TIMEOUT_S = 3.0


class Lifecycle:
    """`stop_simulator` and `stop_server` are set by whoever runs them (the window's docks);
    `shutdown()` runs the steps once; `finish()` closes the history."""

    def __init__(self, workspace: Workspace, bridge: EngineBridge) -> None:
        self.workspace = workspace
        self.bridge = bridge
        self.stop_simulator: Stop | None = None
        self.stop_server: Stop | None = None
        self.steps_done: list[str] = []  # in order (the log and tests read it)
        self.shutdown_s: float | None = None
        self.unattended = False  # told to quit by a signal: nobody to ask about the history

    async def shutdown(self) -> float:
        """Steps 1-4; the seconds they took."""
        started = time.perf_counter()
        self.workspace.closing = True
        steps: list[tuple[str, Stop | None]] = [
            ("simulator", self.stop_simulator),
            ("API server", self.stop_server),
            ("chats' KV", lambda: self.workspace.kv_saver.save_all(
                self.workspace.conversations)),
            ("engine", lambda: self.bridge.shutdown(timeout=ENGINE_TIMEOUT_S)),
        ]
        for name, step in steps:
            if step is None:
                continue
            try:
                await step()
            except Exception:  # noqa: BLE001 - the steps after it must still run
                log.exception("quitting: stopping the %s failed", name)
            self.steps_done.append(name)
        self.shutdown_s = time.perf_counter() - started
        return self.shutdown_s

    def finish(self) -> bool:
        """Step 5, once the loop has ended: True when the history has nothing unsaved."""
        return self.workspace.close_history(set_aside=self.unattended)
