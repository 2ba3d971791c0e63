"""How every script under tools/ runs the real window, in one place: the BLAS re-exec, the
common arguments, the Qt app and its asyncio loop, a throw-away settings file, the window,
the model load, and a screenshot scene's waits and grabs.

The scripts run on whatever display Qt is given: `QT_QPA_PLATFORM=offscreen` for the window
alone, or under Xvfb (`Xvfb :7 -screen 0 1400x900x24 &`, then `DISPLAY=:7`) where a scene
has windows of its own (a dialog, a tooltip, the switch question) and the screen is grabbed.

Imports of app and ui wait until `arguments()` has run: `ensure_preloads` may re-exec the
process, and must do so before MLX is loaded.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication, QWidget

    from app.bridge import EngineBridge
    from app.context import AppContext
    from app.history.writer import HistoryWriter
    from app.settings import Settings
    from ui.event_loop import QtLoop
    from ui.main_window import MainWindow

# The sampling preset of the scenes that show replies: greedy, so a scene's text is the same
# on every run and the pictures change only when the app does.
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
          "repetition_penalty": 1.1, "max_tokens": 90, "seed": None, "stop": []}


def arguments(description: str | None = None, *, out: bool = True) -> argparse.ArgumentParser:
    """The parser every script starts from: `--model` (default: the bundled model) and, for
    screenshots, `--out` (the folder they go to, default docs). Re-execs the process with
    the system OpenBLAS first (engine/blas.py), so call it before anything loads MLX."""
    from engine.preload import ensure_preloads

    ensure_preloads()
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", default="bundled")
    if out:
        p.add_argument("--out", default="docs")
    return p


def out_dir(args: argparse.Namespace) -> Path:
    """`--out`, made if it is not there."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def qt_app(name: str, *, stylesheet: bool = False) -> tuple[QApplication, QtLoop]:
    """The Qt application (named `name` in its argv) and the asyncio loop on it (qasync),
    as the app's own start-up makes them; `stylesheet`: the app's style sheet, as shipped."""
    from ui.event_loop import make_app, make_loop

    app = make_app([name])
    if stylesheet:
        from ui.style import load_stylesheet

        app.setStyleSheet(load_stylesheet())
    return app, make_loop(app)


def scratch_settings() -> Settings:
    """Settings in a fresh temporary folder: a scene never reads or changes the user's."""
    from app.settings import Settings

    return Settings(Path(tempfile.mkdtemp()) / "settings.json")


def open_window(ctx: AppContext,
                size: tuple[int, int] | None = (1200, 780), *,
                history: HistoryWriter | None = None) -> MainWindow:
    """The main window on `ctx` (saving to `history`, if given), shown at `size` (None: the
    size it opens at by itself)."""
    from ui.main_window import MainWindow

    window = MainWindow(ctx, history=history)
    if size is not None:
        window.resize(*size)
    window.show()
    return window


async def load(bridge: EngineBridge, source: str) -> None:
    """Load the model (`--model`); a load that fails ends the script with the bridge's
    message rather than a scene without a model."""
    if not await bridge.load(source):
        raise SystemExit(bridge.message)


def run(loop: QtLoop, scene: Coroutine[Any, Any, Any]) -> Any:
    """Run `scene` on the loop to its end and close the loop; its result."""
    with loop:
        return loop.run_until_complete(scene)


async def wait(predicate: Callable[[], object], timeout: float = 300.0) -> None:
    """Until `predicate()` holds (the loop runs meanwhile); TimeoutError after `timeout`
    seconds, so a scene that never settles fails rather than hangs."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError("screenshot scene did not settle")
        await asyncio.sleep(0.05)


def shot(widget: QWidget, path: Path) -> None:
    """Save `widget` as drawn (its layout settled first) to `path`."""
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
    QApplication.processEvents()
    if not widget.grab().save(str(path)):
        raise OSError(f"could not write {path}")
    print("saved", path, flush=True)


def screen_shot(path: Path, width: int, height: int) -> None:
    """Save the screen's top-left `width` x `height` to `path`: the window at (0, 0) with
    what floats over it (a dialog, a tooltip), which a widget's own grab leaves out."""
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    QApplication.processEvents()
    if not QGuiApplication.primaryScreen().grabWindow(0, 0, 0, width, height).save(str(path)):
        raise OSError(f"could not write {path}")
    print("saved", path, flush=True)


@dataclass
class ScreenScene:
    """A scene whose screen is grabbed (Xvfb): its parsed arguments, the Qt app (held: a
    dropped QApplication is deleted), its loop, the app context and the window at (0, 0)."""

    args: argparse.Namespace
    app: QApplication
    loop: QtLoop
    ctx: AppContext
    window: MainWindow
    out: Path
    prefix: str  # the pictures are --out/screenshot-PREFIX-NAME.png

    def shot(self, name: str, width: int, height: int) -> None:
        """The screen's top-left `width` x `height` (the window and what floats over it) as
        screenshot-PREFIX-`name`.png."""
        screen_shot(self.out / f"screenshot-{self.prefix}-{name}.png", width, height)

    async def dialog_shot(self, name: str, theme: str, width: int, height: int,
                          open_dialog: Callable[[], Any]) -> None:
        """The window in `theme` at `width` x `height`, the dialog `open_dialog()` returns
        open over it, grabbed as `name`, then the dialog dismissed."""
        self.window.set_theme(theme)
        self.window.resize(width, height)
        await asyncio.sleep(0.6)
        dialog = open_dialog()
        await asyncio.sleep(0.6)
        self.shot(name, width, height)
        dialog.reject()
        await asyncio.sleep(0.3)

    def play(self, scene: Coroutine[Any, Any, Any]) -> None:
        """Run `scene` to its end, then shut the engine down (a loaded model's thread)."""

        async def then_shut_down() -> None:
            await scene
            await self.ctx.bridge.shutdown(3.0)

        run(self.loop, then_shut_down())


def screen_scene(prefix: str, size: tuple[int, int] = (1200, 780),
                 description: str | None = None) -> ScreenScene:
    """The set-up every screen-grabbing scene repeated: the arguments parsed (the BLAS
    re-exec first, so call this before anything loads MLX), `--out` made, the Qt app and its
    loop, an app context on scratch settings (no model loaded: `load` one in the scene) and
    the window shown at `size` at the screen's top-left, where `ScreenScene.shot` grabs."""
    args = arguments(description).parse_args()
    out = out_dir(args)

    from app.context import AppContext

    app, loop = qt_app(f"{prefix}-shots")
    ctx = AppContext.create(settings=scratch_settings())
    window = open_window(ctx, size)
    window.move(0, 0)
    return ScreenScene(args, app, loop, ctx, window, out, prefix)
