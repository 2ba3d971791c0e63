"""At most one render of a streaming reply per `min_interval_s` (30 per second), and fewer
when rendering is costly: the next render waits `cost_factor` times as long as the last one
took, so a long reply full of code never keeps the UI thread busy more than a quarter of
the time. The last request always renders (a single-shot timer), so no text is left out."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

MIN_INTERVAL_S = 1 / 30
COST_FACTOR = 4.0


class RenderThrottle(QObject):
    """Calls `render` now or later; `renders` counts the calls, `last_cost_s` the last's
    time."""

    def __init__(self, render: Callable[[], None], parent: QObject | None = None,
                 min_interval_s: float = MIN_INTERVAL_S, cost_factor: float = COST_FACTOR,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        super().__init__(parent)
        self._render = render
        self._clock = clock
        self.min_interval_s = min_interval_s
        self.cost_factor = cost_factor
        self.last_cost_s = 0.0
        self.renders = 0
        self._last_end = -1e9
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.render_now)

    @property
    def interval_s(self) -> float:
        return max(self.min_interval_s, self.cost_factor * self.last_cost_s)

    @property
    def pending(self) -> bool:
        return self._timer.isActive()

    def request(self) -> None:
        """Render soon: now if the last render was long enough ago, else when it is due
        (requests in between are one render)."""
        if self._timer.isActive():
            return
        wait = self._last_end + self.interval_s - self._clock()
        if wait <= 0:
            self.render_now()
        else:
            self._timer.start(max(1, round(wait * 1000)))

    def render_now(self) -> None:
        """Render at once (a finished reply, a tab coming into view)."""
        self._timer.stop()
        started = self._clock()
        self._render()
        self._last_end = self._clock()
        self.last_cost_s = self._last_end - started
        self.renders += 1
