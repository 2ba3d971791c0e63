"""The Qt side of the process: QApplication, the qasync event loop, and the excepthook."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
import traceback
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

import qasync
from PySide6.QtCore import QSocketNotifier, Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from .ui_thread_gc import UiThreadCollector

log = logging.getLogger(__name__)


def make_app(argv: list[str] | None = None) -> QApplication:
    app = QApplication.instance() or QApplication(argv if argv is not None else sys.argv)
    app.setApplicationName("BatchChat")
    app.setOrganizationName("BatchChat")
    app.setQuitOnLastWindowClosed(False)  # the window quits after the engine shut down
    return app  # type: ignore[return-value]


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
    """qasync's loop, whose callbacks see it as running even when Qt dispatches them outside
    `run_forever` (nested dialog loops, pytest-qt's processEvents). While it is open, Python's
    cyclic garbage is collected on the UI thread only (ui/ui_thread_gc.py)."""

    collector: UiThreadCollector | None = None

    def close(self) -> None:
        if self.collector is not None:
            self.collector.stop()
            self.collector = None
        super().close()

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
    loop.collector = UiThreadCollector()
    asyncio.set_event_loop(loop)
    loop.set_exception_handler(_loop_exception_handler)
    return loop


_wakeup: tuple[socket.socket, socket.socket, QSocketNotifier] | None = None


def call_on_signals(signums: Iterable[int], handler: Callable[[int], object]) -> None:
    """Call `handler(signum)` from the Qt loop when one of `signums` (SIGINT, SIGTERM, ...)
    arrives.

    Python runs a signal handler only between bytecodes of the main thread, which may sit in
    Qt's C++ loop until some timer fires: a wake-up socket (`signal.set_wakeup_fd`) watched
    by a QSocketNotifier gets it back at once. `handler` then runs from a zero timer, not
    in the middle of whatever Python code the signal interrupted. A signal the process was
    started with ignored (SIGHUP under `nohup`) stays ignored."""
    global _wakeup
    if _wakeup is None:
        read, write = socket.socketpair()
        read.setblocking(False)
        write.setblocking(False)
        notifier = QSocketNotifier(read.fileno(), QSocketNotifier.Type.Read)
        notifier.activated.connect(lambda *_: _drain(read))
        signal.set_wakeup_fd(write.fileno(), warn_on_full_buffer=False)
        _wakeup = (read, write, notifier)
    for signum in signums:
        if signal.getsignal(signum) == signal.SIG_IGN:
            continue
        signal.signal(signum, lambda n, _frame: QTimer.singleShot(0, lambda: handler(n)))


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(512):
            pass
    except OSError:  # BlockingIOError: drained
        pass


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
