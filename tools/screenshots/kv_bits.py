"""Screenshots for docs/app.md (issue #54): Preferences → KV cache with 8-bit chosen, over
the window, then the stats panel's "KV cache" line after Save reloaded the bundled model
with 8-bit KV (its tooltip shown). Light and dark, 1200x780 and 900x600. Run under Xvfb
(the dialog and the tooltip are windows of their own, so the screen is grabbed):

    Xvfb :7 -screen 0 1400x900x24 &
    DISPLAY=:7 python -m tools.screenshots.kv_bits --out docs
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from tools.app_start import (
    GREEDY,
    arguments,
    load,
    open_window,
    out_dir,
    qt_app,
    run,
    scratch_settings,
    wait,
)

SIZES = ((1200, 780), (900, 600))
TOOLTIP_WIDTH = 500  # about the KV line's tooltip, wrapped
QUESTION = "What is a lighthouse for? Two sentences."


def main() -> None:
    args = arguments().parse_args()
    out = out_dir(args)

    from PySide6.QtCore import QEvent, QPoint
    from PySide6.QtWidgets import QApplication, QScrollArea, QToolTip, QWidget

    from app.context import AppContext
    from app.defaults import Defaults
    from ui.preferences import open_preferences

    _app, loop = qt_app("kv_bits_shots", stylesheet=True)
    settings = scratch_settings()
    settings.defaults = Defaults(params=dict(GREEDY))
    ctx = AppContext.create(settings=settings)
    window = open_window(ctx, SIZES[0])
    window.move(0, 0)

    def screen_shot(widget: QWidget, path: Path) -> None:
        """The screen where `widget` is: with the dialogs and tooltips over it."""
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        QApplication.processEvents()
        g = widget.frameGeometry()
        image = QApplication.primaryScreen().grabWindow(0, g.x(), g.y(), g.width(),
                                                        g.height())
        if not image.save(str(path)):
            raise OSError(f"could not write {path}")
        print("saved", path, flush=True)

    async def each_look(name: str, arrange: Callable[[], Awaitable[None]]) -> None:
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in SIZES:
                window.resize(w, h)
                await asyncio.sleep(0.5)
                await arrange()
                await asyncio.sleep(0.5)
                screen_shot(window, out / f"screenshot-kv-bits-{name}-{theme}-{w}.png")

    async def scene() -> None:
        await load(ctx.bridge, args.model)
        dialog = open_preferences(settings, window, window.reload_model)

        async def preferences() -> None:
            dialog.kv_bits.setCurrentIndex(dialog.kv_bits.findText("8-bit"))
            # no window manager under Xvfb to centre it over the window, as one would
            dialog.move(window.geometry().center() - dialog.rect().center())

        await each_look("preferences", preferences)
        old = ctx.bridge.local.engine
        assert dialog.save()  # reloads the bundled model with 8-bit KV
        await wait(lambda: ctx.bridge.local is not None and ctx.bridge.local.engine is not old
                   and (s := ctx.bridge.stats()) is not None and s.kv_bits == 8)
        tab = window.current_tab()
        tab.send_text(QUESTION)
        await wait(lambda: not tab.conversation.is_busy)
        dock = window.stats_dock
        dock.show()

        async def stats_line() -> None:
            dock.refresh(poll=True)
            label = dock.panel.values["kv_form"]
            area = dock.findChild(QScrollArea)
            if area is not None:
                area.ensureWidgetVisible(label, 0, 120)
            QToolTip.hideText()  # shown again where the label is at this size
            await asyncio.sleep(0.3)
            # from the window's right edge, less a tooltip's width: the label sits at the
            # dock's right, and a tooltip started there runs off the window
            below = label.mapToGlobal(QPoint(0, label.height()))
            left = window.frameGeometry().right() - TOOLTIP_WIDTH
            QToolTip.showText(QPoint(min(below.x(), left), below.y()), label.toolTip(), label)

        await each_look("stats", stats_line)
        QToolTip.hideText()
        await ctx.bridge.shutdown(3.0)

    run(loop, scene())


if __name__ == "__main__":
    main()
