"""A minimal Qt-free event: views subscribe to models without the model knowing Qt.

A listener that is a bound method is held weakly (`weakref.WeakMethod`, as napari's evented
models do): a view that goes away without disconnecting is collected and no longer called,
so no view has to detach by hand for the model to let go of it. Any other callable (a plain
function, a lambda, a builtin such as `list.append`) is held strongly: it has no owner the
event could watch, so its owner disconnects it when it must stop listening.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from types import MethodType
from typing import Any

Listener = Callable[..., Any]


class Event:
    """`connect(fn)`, `disconnect(fn)`, `emit(*args)`.

    A failing listener goes to `sys.excepthook` (the app shows it; pytest-qt fails the test)
    and the remaining listeners still run.
    """

    def __init__(self) -> None:
        # each entry: a WeakMethod (a bound method), or the callable itself
        self._listeners: list[weakref.WeakMethod[Listener] | Listener] = []

    def connect(self, fn: Listener) -> None:
        """Call `fn` on each emit; a bound method only while its object lives."""
        self._listeners.append(weakref.WeakMethod(fn) if isinstance(fn, MethodType) else fn)

    def disconnect(self, fn: Listener | None = None) -> None:
        """Stop calling `fn` (once, as it was connected once); None: every listener."""
        if fn is None:
            self._listeners.clear()
            return
        for i, entry in enumerate(self._listeners):
            if _live(entry) == fn:
                del self._listeners[i]
                return

    def emit(self, *args: Any) -> None:
        for entry in list(self._listeners):
            fn = _live(entry)
            if fn is None:  # its object was collected: forget it
                self._listeners = [e for e in self._listeners if e is not entry]
                continue
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - one broken view must not stop the others
                sys.excepthook(*sys.exc_info())


def _live(entry: weakref.WeakMethod[Listener] | Listener) -> Listener | None:
    return entry() if isinstance(entry, weakref.WeakMethod) else entry
