"""Screenshots for docs/app.md (issue #31): a reply that copied code with n-gram drafts, its
stats line saying how the drafts went, and the stats panel's Speculative decoding group;
light and dark, 1200×780 and 900×600; and Chat → Speculative decoding open (light; dark
after choosing Off while n-gram runs). The bundled model answers. Run under Xvfb:

    Xvfb :7 -screen 0 1400x900x24 &
    DISPLAY=:7 python -m tools.screenshots.speculative --out docs
"""

from __future__ import annotations

import asyncio

from tests.engine.test_speculation_bundled import CODE
from tools.app_start import (
    GREEDY,
    arguments,
    load,
    open_window,
    out_dir,
    qt_app,
    run,
    scratch_settings,
    shot,
    wait,
)

SIZES = ((1200, 780), (900, 600))


def main() -> None:
    args = arguments().parse_args()
    out = out_dir(args)

    from PySide6.QtWidgets import QApplication, QGroupBox

    from app.context import AppContext
    from app.defaults import Defaults

    _app, loop = qt_app("speculative_shots", stylesheet=True)
    settings = scratch_settings()
    settings.user_presets["Greedy"] = GREEDY | {"max_tokens": 200, "repetition_penalty": 1.0}
    # a new tab starts from the app-wide defaults (the preset alone is only listed)
    settings.defaults = Defaults.from_dict({"params": settings.user_presets["Greedy"]})
    ctx = AppContext.create(settings=settings)
    window = open_window(ctx, SIZES[0])

    async def scene() -> None:
        await load(ctx.bridge, args.model)
        tab = window.current_tab()
        window.set_tab_title(tab, "Copy code")
        tab.send_text("Repeat this code exactly, in a code block:\n\n```python\n" + CODE + "```")
        await wait(lambda: not tab.conversation.is_busy)
        print(tab.conversation.messages[-1].stats.summary())
        window.stats_dock.show()
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in SIZES:
                window.resize(w, h)
                await asyncio.sleep(0.5)
                window.stats_dock.refresh(poll=True)
                bar = tab.messages.verticalScrollBar()
                bar.setValue(bar.maximum())  # the reply's end and its stats line
                area = window.stats_dock.widget()  # the panel's group in view
                box = next(b for b in area.findChildren(QGroupBox)
                           if b.title() == "Speculative decoding")
                area.ensureWidgetVisible(box, 0, 120)
                await asyncio.sleep(0.3)
                shot(window, out / f"screenshot-speculative-{theme}-{w}.png")
        window.set_theme("light")
        window.resize(*SIZES[0])
        menu = window.speculative_menu
        menu.popup(window.mapToGlobal(window.rect().center()))
        await asyncio.sleep(0.4)
        QApplication.processEvents()
        shot(menu, out / "screenshot-speculative-menu-light.png")
        menu.hide()
        menu.actions_by_choice["off"].trigger()  # a change waits for the next load
        window.set_theme("dark")
        menu.popup(window.mapToGlobal(window.rect().center()))
        await asyncio.sleep(0.4)
        QApplication.processEvents()
        shot(menu, out / "screenshot-speculative-menu-dark.png")
        menu.hide()
        await ctx.bridge.shutdown(3.0)

    run(loop, scene())


if __name__ == "__main__":
    main()
