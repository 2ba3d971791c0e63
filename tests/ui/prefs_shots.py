"""Screenshots for docs/app.md: the Preferences dialog (the defaults for new tabs) over the
window, and a tab whose settings differ from the defaults (marked •, with the tooltip that
names the default); light and dark, 1200×780 and 900×600. The bundled model answers. Run
under Xvfb (the dialog and the tooltip are windows of their own, so the screen is grabbed):

    Xvfb :7 -screen 0 1400x900x24 &
    DISPLAY=:7 python -m tests.ui.prefs_shots --out docs
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from tests.ui.remote_shots import wait

SIZES = ((1200, 780), (900, 600))


def main() -> None:
    from engine.blas import ensure_fast_blas

    ensure_fast_blas()
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="bundled")
    p.add_argument("--out", default="docs")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from PySide6.QtCore import QEvent, QPoint
    from PySide6.QtWidgets import QApplication, QToolTip, QWidget

    from app.context import AppContext
    from app.defaults import DEFAULT_PARAMS
    from app.settings import Settings
    from ui.event_loop import make_app, make_loop
    from ui.main_window import MainWindow
    from ui.preferences import open_preferences

    app = make_app(["prefs_shots"])
    loop = make_loop(app)
    settings = Settings(Path(tempfile.mkdtemp()) / "settings.json")
    settings.set_defaults("You are a helpful assistant. Answer briefly.",
                          DEFAULT_PARAMS | {"max_tokens": 256, "temperature": 0.6})
    settings.show_settings_panel = True
    ctx = AppContext.create(settings=settings)
    window = MainWindow(ctx)
    window.resize(*SIZES[0])
    window.show()

    def screen_shot(widget: QWidget, path: Path) -> None:
        """The screen where `widget` is: with the dialogs and tooltips over it."""
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        QApplication.processEvents()
        g = widget.frameGeometry()
        image = QApplication.primaryScreen().grabWindow(0, g.x(), g.y(), g.width(),
                                                        g.height())
        if not image.save(str(path)):
            raise OSError(f"could not write {path}")
        print("saved", path)

    async def each_look(name: str, scene) -> None:  # noqa: ANN001
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in SIZES:
                window.resize(w, h)
                await asyncio.sleep(0.4)
                await scene()
                await asyncio.sleep(0.4)
                screen_shot(window, out / f"screenshot-{name}-{theme}-{w}.png")

    async def run() -> None:
        if not await ctx.bridge.load(args.model):
            raise SystemExit(ctx.bridge.message)
        tab = window.current_tab()
        window.set_tab_title(tab, "Haiku")
        panel = tab.panel
        panel.system.setPlainText("You are a poet. Answer in one haiku.")
        panel.fields["temperature"].setValue(1.1)
        panel.fields["max_tokens"].setValue(60)
        tab.send_text("Write a haiku about the sea.")
        await wait(lambda: not tab.conversation.is_busy)

        async def tooltip() -> None:
            label = panel.labels["temperature"]
            tab.panel_area.ensureWidgetVisible(label)
            QToolTip.hideText()  # shown again where the label is at this size
            await asyncio.sleep(0.3)
            QToolTip.showText(label.mapToGlobal(QPoint(4, label.height())), label.toolTip(),
                              label)

        await each_look("overrides", tooltip)
        QToolTip.hideText()

        async def dialog() -> None:
            QToolTip.hideText()
            dialog = open_preferences(settings, window)
            dialog.fields["max_tokens"].setText("60k")  # the clear message for bad input
            dialog.save()
            # no window manager under Xvfb to centre it over the window, as one would
            dialog.move(window.geometry().center() - dialog.rect().center())

        await each_look("preferences", dialog)
        await ctx.bridge.shutdown(3.0)

    with loop:
        loop.run_until_complete(run())


if __name__ == "__main__":
    main()
