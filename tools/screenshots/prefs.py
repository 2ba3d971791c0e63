"""Screenshots for docs/app.md: the Preferences dialog (the defaults for new tabs) over the
window, and a tab whose settings differ from the defaults (marked •, with the tooltip that
names the default); light and dark, 1200×780 and 900×600. The bundled model answers. Run
under Xvfb (the dialog and the tooltip are windows of their own, so the screen is grabbed):

    Xvfb :7 -screen 0 1400x900x24 &
    DISPLAY=:7 python -m tools.screenshots.prefs --out docs
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tools.app_start import (
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


def main() -> None:
    args = arguments().parse_args()
    out = out_dir(args)

    from PySide6.QtCore import QEvent, QPoint
    from PySide6.QtWidgets import QApplication, QToolTip, QWidget

    from app.context import AppContext
    from app.defaults import DEFAULT_PARAMS
    from ui.preferences import open_preferences

    _app, loop = qt_app("prefs_shots")
    settings = scratch_settings()
    settings.set_defaults("You are a helpful assistant. Answer briefly.",
                          DEFAULT_PARAMS | {"max_tokens": 256, "temperature": 0.6})
    settings.show_settings_panel = True
    ctx = AppContext.create(settings=settings)
    window = open_window(ctx, SIZES[0])

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

    async def each_look(name: str, arrange) -> None:  # noqa: ANN001
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in SIZES:
                window.resize(w, h)
                await asyncio.sleep(0.4)
                await arrange()
                await asyncio.sleep(0.4)
                screen_shot(window, out / f"screenshot-{name}-{theme}-{w}.png")

    async def scene() -> None:
        await load(ctx.bridge, args.model)
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

    run(loop, scene())


if __name__ == "__main__":
    main()
