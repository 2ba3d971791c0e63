"""Python's cyclic garbage collector runs on the UI thread only, while the Qt loop is open.

Why: CPython starts a collection on whichever thread happens to allocate when generation
0 overflows. The engine's worker thread allocates most, so a cycle holding Qt wrappers (a
deleted message widget, a closed tab) could be collected there, and PySide destroying a
QObject off its thread crashes the process (seen in CI: a segfault whose stack was
"Garbage-collecting" on the engine thread during a UI test). Here the automatic collector
is off and a timer on the UI thread collects instead, choosing the generation by the same
thresholds CPython would. Reference counting still frees everything not in a cycle at once.

What exists when the loop opens (modules, classes, functions: ~195,000 objects in the app) is
never garbage, yet a full collection walked it all on the UI thread: 174 CPU-ms each on the
app's imports, a visible stall. So it is collected once and frozen (`gc.freeze`): full
collections then walk only what was made since. Objects made later are collected as before.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

INTERVAL_MS = 100  # a tick's worth: cycles wait at most this long to be collected

_outside_freeze: bool | None = None


def _frozen_elsewhere() -> bool:
    """Whether objects were frozen before the first collector of this process opened (by
    its caller, not by a collector). Asked once: `gc.get_freeze_count()` walks every frozen
    object, and each collector's freeze adds to them (the test suite opens a loop a UI test:
    59 of its CPU-s went to these walks)."""
    global _outside_freeze
    if _outside_freeze is None:
        _outside_freeze = gc.get_freeze_count() > 0
    return _outside_freeze


class UiThreadCollector(QObject):
    """Collects on the thread it lives on (the UI thread); `stop()` gives the collection
    back to CPython as it was."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._froze = not _frozen_elsewhere()  # a caller's own freeze is left as it is
        gc.collect()
        gc.freeze()
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.collect)
        self._timer.start(INTERVAL_MS)

    def collect(self) -> None:
        """The generation CPython's automatic collector would pick now, if any."""
        counts, limits = gc.get_count(), gc.get_threshold()
        for generation in (2, 1, 0):
            if limits[generation] and counts[generation] > limits[generation]:
                gc.collect(generation)
                return

    def stop(self) -> None:
        self._timer.stop()
        if self._froze:
            gc.unfreeze()
        if self._was_enabled:
            gc.enable()
