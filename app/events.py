"""A minimal Qt-free event: views subscribe to models without the model knowing Qt."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


class Event:
    """`connect(fn)`, `disconnect(fn)`, `emit(*args)`.

    A failing listener goes to `sys.excepthook` (the app shows it; pytest-qt fails the test)
    and the remaining listeners still run.
    """

    def __init__(self) -> None:
        self._listeners: list[Callable[..., Any]] = []

    def connect(self, fn: Callable[..., Any]) -> None:
        self._listeners.append(fn)

    def disconnect(self, fn: Callable[..., Any] | None = None) -> None:
        if fn is None:
            self._listeners.clear()
        elif fn in self._listeners:
            self._listeners.remove(fn)

    def emit(self, *args: Any) -> None:
        for fn in list(self._listeners):
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - one broken view must not stop the others
                sys.excepthook(*sys.exc_info())
