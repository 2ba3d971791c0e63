"""`emit()`: emit a Qt signal from Python without PySide 6.12's refcount leak.

In PySide 6.12.0 `SignalInstance.emit()` returns `True` without taking a reference, so each
Python-side emit lowers `True`'s refcount by one; on Python 3.11 (where `True` is not
immortal) a long session would reach zero and abort with "bool_dealloc". This helper gives
the reference back, only when the running PySide is measured to leak it.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from PySide6.QtCore import QObject, Signal, SignalInstance


class _Probe(QObject):
    ping = Signal()


def _emit_leaks_true() -> bool:
    probe = _Probe()
    before = sys.getrefcount(True)
    probe.ping.emit()
    leaks = sys.getrefcount(True) < before
    if leaks:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(True))
    return leaks


_LEAKS = sys.version_info < (3, 12) and _emit_leaks_true()


def emit(signal: SignalInstance, *args: Any) -> None:
    result = signal.emit(*args)
    if _LEAKS and result is True:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(True))


def pin_singletons() -> None:
    """Give None, True and False a reference count no leak can run down (as Python 3.12's
    immortal objects). Besides `emit()`, PySide 6.12 loses one reference to None each time
    C++ calls a Python override of a void virtual (paintEvent, showEvent, keyPressEvent,
    QGraphicsItem.paint, ...), and pyqtgraph emits its own signals from Python: its charts
    alone lose about 150 references per redraw. Idempotent; only on CPython before 3.12
    (release builds, where the reference count is an object's first field)."""
    global _PINNED
    if _PINNED or sys.version_info >= (3, 12) or sys.implementation.name != "cpython" \
            or hasattr(sys, "gettotalrefcount"):
        return
    for obj in (None, True, False):
        ctypes.c_ssize_t.from_address(id(obj)).value += _PIN
    _PINNED = True


_PIN = 1 << 56
_PINNED = False
pin_singletons()
