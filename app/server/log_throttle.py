"""At most one log line per condition per interval: a flood of the same event (thousands of
stalled connections, refusals at the connection cap) is one line, then one every
`interval_s` saying how many more there were."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class Throttled:
    """Log one condition's lines at most once per `interval_s`; the ones held back are
    counted into the next line."""

    def __init__(self, logger: logging.Logger, level: int, interval_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._level = level
        self._interval = interval_s
        self._clock = clock
        self._next = float("-inf")  # when the next line may be written
        self._held = 0  # lines not written since the last one

    def __call__(self, message: str, *args: object) -> None:
        now = self._clock()
        if now < self._next:
            self._held += 1
            return
        if self._held:
            message += f" (and {self._held} more like it in the {self._interval:g} s before)"
        self._held = 0
        self._next = now + self._interval
        self._log.log(self._level, message, *args)
