"""Screenshots for docs/app.md (issue #31): a reply that copied code with n-gram drafts, its
stats line saying how the drafts went, and the stats panel's Speculative decoding group;
light and dark, 1200×780 and 900×600; and Chat → Speculative decoding open (light; dark
after choosing Off while n-gram runs). The bundled model answers. Run under Xvfb:

    Xvfb :7 -screen 0 1400x900x24 &
    DISPLAY=:7 python -m tests.ui.speculative_shots --out docs
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from tests.engine.test_speculation_bundled import CODE
from tests.ui.remote_shots import GREEDY, shot, wait

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

    from PySide6.QtWidgets import QApplication, QGroupBox

    from app.context import AppContext
    from app.settings import Settings
    from ui.event_loop import make_app, make_loop
    from ui.main_window import MainWindow
    from ui.style import load_stylesheet

    app = make_app(["speculative_shots"])
    app.setStyleSheet(load_stylesheet())
    loop = make_loop(app)
    tmp = Path(tempfile.mkdtemp())
    settings = Settings(tmp / "settings.json")
    settings.user_presets["Greedy"] = GREEDY | {"max_tokens": 200, "repetition_penalty": 1.0}
    settings.default_preset = "Greedy"
    ctx = AppContext.create(settings=settings)
    window = MainWindow(ctx)
    window.resize(*SIZES[0])
    window.show()

    async def run() -> None:
        if not await ctx.bridge.load(args.model):
            raise SystemExit(ctx.bridge.message)
        tab = window.current_tab()
        window.set_tab_title(tab, "Copy code")
        tab.send_text("Copy this Python code:\n\n```python\n" + CODE + "```")
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

    with loop:
        loop.run_until_complete(run())


if __name__ == "__main__":
    main()
