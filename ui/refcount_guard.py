"""The one workaround for PySide6 6.12's lost references to None and True (Python 3.11).

The bug. On CPython before 3.12, None, True and False are reference-counted like any other
object, and PySide6 6.12 gives back references it never took:

* `SignalInstance.emit()` called from Python returns True without a new reference, so each
  Python-side emit lowers True's count by one: the app's own signals, qasync's
  `call_soon_threadsafe` (a signal emitted once per engine tick, from the engine thread),
  pyqtgraph's internal signals;
* each time C++ calls a Python override of a void virtual (paintEvent, showEvent, hideEvent,
  QGraphicsItem.paint, ...) one reference to None is lost.

A fresh process holds about 600 references to True and 5,000 to None; streaming replies and
redrawing charts (about 150 lost per stats-chart redraw) run one of them down to zero within
minutes, and the interpreter aborts: "Fatal Python error: bool_dealloc" or "none_dealloc".

The workaround. `pin_singletons()` adds 2**56 to the reference counts of None, True and
False, once, when the `ui` package is imported (ui/__init__.py), before any Qt object of
ours exists. At a million lost references a second that lasts over two thousand years, so
every leaking call anywhere in the process is covered, whoever makes it, and the code calls
`signal.emit(...)` plainly. Python 3.12 made these objects immortal, so it does nothing
there, nor on other interpreters or debug builds (where the count is not the object's first
field). tests/ui/test_refcount_guard.py aborts without it.
"""

from __future__ import annotations

import ctypes
import sys

_PIN = 1 << 56
_pinned = False


def pin_singletons() -> None:
    """Give None, True and False a reference count no leak can run down. Idempotent."""
    global _pinned
    if _pinned or sys.version_info >= (3, 12) or sys.implementation.name != "cpython" \
            or hasattr(sys, "gettotalrefcount"):
        return
    for obj in (None, True, False):
        ctypes.c_ssize_t.from_address(id(obj)).value += _PIN
    _pinned = True
