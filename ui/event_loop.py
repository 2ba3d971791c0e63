"""The Qt side of the process: QApplication, the qasync event loop, and the excepthook."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any

import qasync
from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

log = logging.getLogger(__name__)


def make_app(argv: list[str] | None = None) -> QApplication:
    app = QApplication.instance() or QApplication(argv if argv is not None else sys.argv)
    app.setApplicationName("BatchChat")
    app.setOrganizationName("BatchChat")
    app.setQuitOnLastWindowClosed(False)  # the window quits after the engine shut down
    return app  # type: ignore[return-value]


_WAKE = QEvent.Type(QEvent.registerEventType())


class _Waker(QObject):
    """Brings callbacks from other threads to the loop with a posted event."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._loop = loop
        self._lock = threading.Lock()
        self._pending: deque[tuple[Callable[..., Any], tuple[Any, ...], Any]] = deque()
        self._posted = False

    def post(self, callback: Callable[..., Any], args: tuple[Any, ...], context: Any) -> None:
        with self._lock:
            self._pending.append((callback, args, context))
            if self._posted:
                return
            self._posted = True
        QCoreApplication.postEvent(self, QEvent(_WAKE))

    def event(self, event: QEvent) -> bool:
        if event.type() != _WAKE:
            return super().event(event)
        with self._lock:
            items = list(self._pending)
            self._pending.clear()
            self._posted = False
        if not self._loop.is_closed():
            for callback, args, context in items:
                self._loop.call_soon(callback, *args, context=context)
        return True


class _Handle(asyncio.Handle):
    """A callback that Qt may dispatch outside `run_forever` (a nested dialog loop,
    pytest-qt's processEvents): it still sees this loop as the running one."""

    __slots__ = ()

    def _run(self) -> None:
        if asyncio._get_running_loop() is not None:
            super()._run()
            return
        asyncio._set_running_loop(self._loop)  # type: ignore[attr-defined]
        try:
            super()._run()
        finally:
            asyncio._set_running_loop(None)


class QtLoop(qasync.QEventLoop):
    """qasync's loop, with `call_soon_threadsafe` done by `QCoreApplication.postEvent`.

    qasync emits a Python-side Qt signal per call, and in PySide 6.12 every
    `SignalInstance.emit()` from Python returns `True` without taking a reference: the
    engine hands over events once per tick, so `True`'s refcount would run down to zero
    and the interpreter abort ("bool_dealloc") after a long session. A posted event has no
    such leak, and bursts from the engine thread coalesce into one wake-up. Callbacks also
    see this loop as running even when Qt dispatches them outside `run_forever`.
    """

    def __init__(self, app: QApplication | None = None) -> None:
        super().__init__(app)
        self._waker = _Waker(self)

    def call_soon_threadsafe(self, callback: Callable[..., Any], *args: Any,
                             context: Any = None) -> None:
        self._waker.post(callback, args, context)

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any,
                   context: Any = None) -> Any:
        if not callable(callback) or asyncio.iscoroutinefunction(callback):
            raise TypeError(f"call_later needs a plain callable, got {callback!r}")
        return self._add_callback(_Handle(callback, args, self, context=context), delay)

    def run_until_complete(self, future: Any) -> Any:
        """As qasync's, minus its final `processEvents()` after the loop stopped: that ran
        due asyncio callbacks with no running loop (tests call this many times)."""
        if self.is_running():
            raise RuntimeError("Event loop already running")
        task = asyncio.ensure_future(future, loop=self)

        def stop(_: Any) -> None:
            self.stop()

        task.add_done_callback(stop)
        try:
            self.run_forever()
        finally:
            task.remove_done_callback(stop)
        if not task.done():
            raise RuntimeError("Event loop stopped before Future completed.")
        return task.result()


def make_loop(app: QApplication) -> QtLoop:
    loop = QtLoop(app)
    asyncio.set_event_loop(loop)
    loop.set_exception_handler(_loop_exception_handler)
    return loop


def install_excepthook(parent: Callable[[], QWidget | None]) -> None:
    """Show unexpected errors in a (non-modal) message box instead of dying silently."""

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        text = "".join(traceback.format_exception(kind, exc, tb))
        log.error("unhandled error:\n%s", text)
        if isinstance(exc, KeyboardInterrupt):
            QApplication.quit()
            return
        box = QMessageBox(QMessageBox.Icon.Critical, "BatchChat: unexpected error",
                          f"{kind.__name__}: {exc}", QMessageBox.StandardButton.Ok, parent())
        box.setDetailedText(text)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()

    sys.excepthook = hook


def _loop_exception_handler(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    exc = context.get("exception")
    if exc is None or isinstance(exc, asyncio.CancelledError):
        log.warning("event loop: %s", context.get("message"))
        return
    sys.excepthook(type(exc), exc, exc.__traceback__)
