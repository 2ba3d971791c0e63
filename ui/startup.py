"""The window's start-up (`python -m batchchat` without --cli; batchchat/launcher.py calls
it): QApplication, the qasync loop, the history, the main window; runs until the window has
closed and the engine stopped."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable

from app.bridge import EngineBridge, Loader
from app.context import AppContext
from app.history.writer import HistoryWriter

from .event_loop import call_on_signals, install_excepthook, make_app, make_loop
from .main_window import MainWindow
from .style import load_stylesheet


def run_window(args: argparse.Namespace, *, loader: Loader | None = None,
               on_window: Callable[[MainWindow], object] | None = None) -> int:
    """`loader` (model source -> Engine) replaces Engine.load, and `on_window` gets the window
    before the loop runs: end-to-end tests run the real app so (tests/ui/tiny_app.py)."""
    app = make_app(sys.argv[:1])
    app.setStyleSheet(load_stylesheet())
    loop = make_loop(app)
    ctx = AppContext.create(bridge=EngineBridge(loader) if loader is not None else None)
    window = MainWindow(ctx, history=HistoryWriter.open(args.db))  # the Workspace keeps it
    if on_window is not None:
        on_window(window)
    install_excepthook(lambda: window)
    window.shutdown_finished.connect(app.quit)
    window.show()
    # Ctrl+C, and the session's SIGTERM/SIGHUP at logout or `kill`: the same clean quit
    call_on_signals(QUIT_SIGNALS, lambda signum: _on_signal(window, signum))
    with loop:
        window.load_model(args.model or ctx.settings.model)
        loop.run_forever()
    # last try at anything still unsaved (logged if it fails); after SIGTERM/SIGHUP, what
    # still cannot be saved is set aside, since no one could be asked
    window.lifecycle.finish()
    return 0


QUIT_SIGNALS = [signal.SIGINT, signal.SIGTERM] + (
    [signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])  # SIGHUP: POSIX only


def _on_signal(window: MainWindow, signum: int) -> None:
    if signum == signal.SIGINT:
        _interrupt(window)
    else:
        _terminate(window)


def _interrupt(window: MainWindow) -> None:
    """Ctrl+C closes the window; a second one while it asks about unsaved history quits."""
    if window.history is not None and window.history.quit_box is not None:
        window.history.quit_anyway()
    else:
        window.close()


def _terminate(window: MainWindow) -> None:
    """SIGTERM, SIGHUP: close the window as Quit does (layout and drafts saved, replies
    end "shutdown", the open chats' KV saved, the engine stopped, exit 0), but with no one
    to answer a question: unsaved history is set aside instead of asked about."""
    if window.history is not None:
        window.history.quit_unattended()
    else:
        window.close()
