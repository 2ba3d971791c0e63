"""The window's start-up (`python -m app` without --cli): QApplication, the qasync loop, the
history, the main window; runs until the window has closed and the engine stopped."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable

from app.context import AppContext
from app.engine_bridge import EngineBridge, Loader
from app.history.sync import HistorySync

from .event_loop import install_excepthook, make_app, make_loop
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
    ctx.history = HistorySync.open(args.db)
    ctx.store = ctx.history.store
    window = MainWindow(ctx)
    if on_window is not None:
        on_window(window)
    install_excepthook(lambda: window)
    window.shutdown_finished.connect(app.quit)
    window.show()
    signal.signal(signal.SIGINT, lambda *_: _interrupt(window))  # Ctrl+C: the same clean exit
    with loop:
        window.load_model(args.model or ctx.settings.model)
        loop.run_forever()
    ctx.history.close()  # last try at anything still unsaved (logged if it fails)
    return 0


def _interrupt(window: MainWindow) -> None:
    """Ctrl+C closes the window; a second one while it asks about unsaved history quits."""
    if window.history is not None and window.history.quit_box is not None:
        window.history.quit_anyway()
    else:
        window.close()
