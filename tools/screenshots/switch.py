"""Screenshots for docs/app.md's "Switching models": the question asked when a model is
loaded while replies run (light and dark, 1200x780 and 900x600), the banner while a switch
waits for them, and the stats panel after the switch. Run under Xvfb (the question is a
window of its own, so the screen is captured with ImageMagick's `import`):

    Xvfb :83 -screen 0 1400x900x24 &
    DISPLAY=:83 python -m tools.screenshots.switch --out docs
"""

from __future__ import annotations

import asyncio
import functools
import subprocess
from pathlib import Path

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication, QWidget

from tools import app_start
from tools.app_start import arguments, load, out_dir, qt_app, scratch_settings

LONG = app_start.GREEDY | {"max_tokens": 4000}  # replies still running at each question
STORY = "Write a long story about a lighthouse keeper and a storm."
RECIPE = "Explain, step by step, how to bake sourdough bread at home."


def grab_screen(window: QWidget, path: Path, size: tuple[int, int]) -> None:
    """The screen where the window is (the question box included), at the window's size."""
    QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
    QApplication.processEvents()
    geo = window.frameGeometry()
    raw = path.with_suffix(".raw.png")
    subprocess.run(["import", "-window", "root", str(raw)], check=True)
    subprocess.run(["convert", str(raw), "-crop", f"{size[0]}x{size[1]}+{geo.x()}+{geo.y()}",
                    "+repage", "-strip", "+dither", "-colors", "256",  # docs keep < 250 KB
                    str(path)], check=True)
    raw.unlink()
    print("saved", path)


# a scene that has not settled in 2 minutes will not (a model switch is the slowest step)
wait = functools.partial(app_start.wait, timeout=120.0)


def main() -> None:
    args = arguments().parse_args()
    out = out_dir(args)

    from app.bridge import Choice
    from app.context import AppContext
    from app.defaults import Defaults

    _app, loop = qt_app("switch_shots", stylesheet=True)
    settings = scratch_settings()
    settings.user_presets["Long"] = dict(LONG)
    # a new tab starts from the app-wide defaults (the preset alone is only listed)
    settings.defaults = Defaults.from_dict({"params": settings.user_presets["Long"]})
    ctx = AppContext.create(settings=settings)
    window = app_start.open_window(ctx)
    window.move(0, 0)

    async def ask(size: tuple[int, int], theme: str) -> asyncio.Task[bool]:
        window.set_theme(theme)
        window.resize(*size)
        await asyncio.sleep(0.5)
        task = window.load_model(args.model)
        await wait(lambda: window.switch_question is not None)
        await asyncio.sleep(0.8)  # a few more tokens streamed behind it
        return task

    async def scene() -> None:
        await load(ctx.bridge, args.model)
        first = window.current_tab()
        first.send_text(STORY)
        second = window.new_tab()
        second.send_text(RECIPE)
        window.tabs.setCurrentWidget(first)
        await wait(lambda: len(first.conversation.messages[-1].content) > 200)
        for theme in ("light", "dark"):
            for size in ((1200, 780), (900, 600)):
                task = await ask(size, theme)
                grab_screen(window, out / f"screenshot-switch-{theme}-{size[0]}.png", size)
                window.switch_question.buttons[None].click()
                await task
        # the banner while the switch waits for them (cancelled at 900 px), then the stats
        task = await ask((900, 600), "dark")
        window.switch_question.buttons[Choice.FINISH].click()
        await wait(lambda: window.banner.cancel_switch.isVisible())
        await asyncio.sleep(0.5)
        grab_screen(window, out / "screenshot-switch-waiting-dark-900.png", (900, 600))
        window.banner.cancel_switch.click()
        await task
        window.set_theme("light")
        window.resize(1200, 780)
        window.stats_dock.show()
        task = await ask((1200, 780), "light")
        window.switch_question.buttons[Choice.FINISH].click()
        await wait(lambda: window.banner.cancel_switch.isVisible())
        await asyncio.sleep(0.5)
        grab_screen(window, out / "screenshot-switch-waiting-light-1200.png", (1200, 780))
        window.banner.stop_now.click()
        await task
        await asyncio.sleep(3)
        third = window.new_tab()
        third.send_text("Say hello in three languages.")
        await wait(lambda: not third.conversation.is_busy)
        window.tabs.setCurrentWidget(first)
        await asyncio.sleep(1.5)
        grab_screen(window, out / "screenshot-switch-stopped-light-1200.png", (1200, 780))
        dock = window.stats_dock  # floated at full size: the charts beside the numbers
        dock.setFloating(True)
        dock.move(0, 0)
        dock.resize(1200, 780)
        await asyncio.sleep(1.0)
        dock.widget().ensureWidgetVisible(dock.panel.model_line, 0, 10)
        await asyncio.sleep(0.5)
        grab_screen(dock, out / "screenshot-switch-stats-light-1200.png", (1200, 780))
        window.close()
        await wait(lambda: window._closed, timeout=30)

    app_start.run(loop, scene())


if __name__ == "__main__":
    main()
