"""UI tests: the real main window, offscreen, on a qasync loop and a tiny random model.

pytest-qt does not drive asyncio, so each test gets its own qasync loop (`loop`) and drives
it with `loop.run_until_complete(...)` from plain (sync) test functions.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
import qasync  # noqa: E402
from PySide6.QtCore import QEvent  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.bridge import EngineBridge  # noqa: E402
from app.context import AppContext  # noqa: E402
from app.defaults import Defaults  # noqa: E402
from app.settings import Settings  # noqa: E402
from engine import Engine  # noqa: E402
from ui.event_loop import make_loop  # noqa: E402

# Greedy, no end token: every reply runs to max_tokens, so tests know when it ends.
FAST = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
        "repetition_penalty": 1.0, "max_tokens": 12, "seed": None, "stop": []}


@pytest.fixture(autouse=True)
def _collect_qt_garbage() -> Iterator[None]:
    """Free each test's Qt wrappers after all its fixtures are gone: left to interpreter
    shutdown, PySide 6.12 can crash while garbage-collecting them."""
    yield
    gc.collect()


@pytest.fixture
def loop(qapp: Any) -> Iterator[qasync.QEventLoop]:
    qapp.setQuitOnLastWindowClosed(False)  # as the app: closing the window must not exit()
    # Earlier tests' cyclic garbage is collected now, with no loop running: once the loop
    # is open, collection moves into its timer (ui/ui_thread_gc.py), and a finalizer that
    # schedules its close on the running loop (openai's and httpx's async clients) would
    # run on this test's loop, against transports of a loop already closed.
    gc.collect()
    loop = make_loop(qapp)
    yield loop
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.wait(pending, timeout=2))
    loop.close()
    asyncio.set_event_loop(None)


@pytest.fixture
def settings(tmp_path: Any) -> Settings:
    s = Settings(tmp_path / "settings.json")
    s.user_presets["Fast"] = dict(FAST)
    s.defaults = Defaults(params=dict(FAST))  # new tabs start with FAST
    return s


LONG_CONTEXT = 8192


@pytest.fixture
def ctx(loop: qasync.QEventLoop, settings: Settings,
        make_engine: Callable[..., Engine]) -> Iterator[AppContext]:
    # Room for a long reply (5,000 tokens): tests close a tab, stop or quit under one, and
    # on a busy machine a reply could reach the tiny model's 512 tokens before they act.
    bridge = EngineBridge(loader=lambda source: make_engine(context_length=LONG_CONTEXT))
    loop.run_until_complete(bridge.use_engine(make_engine(context_length=LONG_CONTEXT), "tiny"))
    yield AppContext(settings, bridge)
    loop.run_until_complete(bridge.shutdown(timeout=2.0))


@pytest.fixture
def window(ctx: AppContext, loop: qasync.QEventLoop, qtbot: Any) -> Iterator[Any]:
    from ui.main_window import MainWindow

    # Not qtbot.addWidget: pytest-qt would close it before this teardown, outside the loop.
    w = MainWindow(ctx)
    w.show()
    qtbot.waitExposed(w)
    yield w
    if not w._closed:  # shut down through the loop, as the app does
        w.close()
        run_until(loop, lambda: w._closed, timeout=10)
    w.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture
def make_window(loop: qasync.QEventLoop, settings: Settings,
                qtbot: Any) -> Iterator[Callable[[EngineBridge], Any]]:
    """`make_window(bridge)`: a shown main window on that bridge (closed through the loop
    afterwards, as the app closes)."""
    from ui.main_window import MainWindow

    made = []

    def build(bridge: EngineBridge) -> MainWindow:
        w = MainWindow(AppContext(settings, bridge))
        w.show()
        made.append(w)
        return w

    yield build
    for w in made:
        if not w._closed:
            w.close()
            run_until(loop, lambda w=w: w._closed, timeout=10)
        w.deleteLater()


def run_until(loop: qasync.QEventLoop, predicate: Callable[[], bool],
              timeout: float = 20.0) -> None:
    """Run the qasync loop until `predicate()` holds; fail after `timeout` seconds."""

    async def wait() -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout} s")
            await asyncio.sleep(0.005)

    loop.run_until_complete(wait())


def start_long_reply(tab: Any, loop: qasync.QEventLoop, text: str) -> Any:
    """Send `text` with room for a long reply and wait until it has streamed a little;
    the reply's generation (to close the tab under it, say)."""
    tab.panel.fields["max_tokens"].setValue(5000)
    tab.send_text(text)
    gen = tab.conversation.generation
    run_until(loop, lambda: len(tab.conversation.messages[-1].content) > 3)
    return gen


def spin(loop: qasync.QEventLoop, seconds: float) -> None:
    loop.run_until_complete(asyncio.sleep(seconds))


class HistoryApp:
    """The real window on a history database in tmp_path; `start()` again after `stop()`
    is a restart on the same file."""

    def __init__(self, loop: qasync.QEventLoop, settings: Settings,
                 make_engine: Callable[..., Engine], qtbot: Any, db: Any) -> None:
        self.loop, self.settings, self.make_engine, self.qtbot = loop, settings, make_engine, qtbot
        self.db = db
        # make_engine's, for the next start()
        self.engine_options: dict[str, Any] = {"context_length": LONG_CONTEXT}
        self.window: Any = None
        self.history: Any = None

    def start(self, **sync_options: float) -> Any:
        from app.history.writer import HistoryWriter
        from ui.main_window import MainWindow

        options = dict(self.engine_options)
        bridge = EngineBridge(loader=lambda source: self.make_engine(**options))
        self.loop.run_until_complete(bridge.use_engine(self.make_engine(**options), "tiny"))
        from app.storage import SafeStore

        # the tests' own handle on the file, to write fixtures as the writer would
        self.store = SafeStore.open(self.db)
        self.history = HistoryWriter.over(self.store, **sync_options)
        ctx = AppContext(self.settings, bridge)
        self.window = MainWindow(ctx, history=self.history)
        self.window.show()
        self.qtbot.waitExposed(self.window)
        try:  # shortcuts need an active window; offscreen activates it a moment later
            run_until(self.loop, lambda: QApplication.activeWindow() is not None, timeout=1)
        except AssertionError:
            pass
        return self.window

    def stop(self) -> None:
        w, self.window = self.window, None
        if w is None:
            return
        if not w._closed:
            w.close()
            run_until(self.loop, lambda: w._closed, timeout=10)
        self.history.close()
        w.deleteLater()
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture
def history_app(loop: qasync.QEventLoop, settings: Settings,
                make_engine: Callable[..., Engine], qtbot: Any,
                tmp_path: Any) -> Iterator[HistoryApp]:
    app = HistoryApp(loop, settings, make_engine, qtbot, tmp_path / "h.db")
    yield app
    app.stop()
