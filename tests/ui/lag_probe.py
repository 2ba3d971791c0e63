"""A probe that measures how late the event loop runs a timer (its lag); used by the lag
tests and the runs by hand (tests/ui/lag_run.py; tools/measure/)."""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, Qt, QTimer


class LagProbe(QObject):
    """Event-loop lag: a precise timer asks for `interval_ms`; the overshoot of each firing
    beyond that is how long the loop was busy elsewhere (painting, Python, the GIL)."""

    def __init__(self, interval_ms: int = 10, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.interval_ms = interval_ms
        self.samples_ms: list[float] = []
        self._last: float | None = None
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._tick)

    def start(self) -> None:
        self.samples_ms.clear()
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def _tick(self) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.samples_ms.append(max(0.0, (now - self._last) * 1000 - self.interval_ms))
        self._last = now

    def percentile(self, q: float, since: int = 0) -> float:
        """The q-th percentile of the samples from index `since` on."""
        return percentile(self.samples_ms[since:], q)

    def summary(self) -> str:
        return (f"{len(self.samples_ms)} samples, lag p50 {self.percentile(50):.1f} ms, "
                f"p99 {self.percentile(99):.1f} ms, max {max(self.samples_ms, default=0):.1f} ms")


def percentile(samples: list[float], q: float) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]
