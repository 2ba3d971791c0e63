"""Screenshots for docs/app.md (issue #51): Preferences → Chat with files → Retrieval model
with the bundled model chosen, over the window; then a long file's chip while its index is
built ("indexing 42 %"). Light and dark, 1200x780 and 900x600. Run under Xvfb (the dialog
is a window of its own, so the screen is grabbed):

    Xvfb :7 -screen 0 1400x900x24 &
    DISPLAY=:7 python -m tools.screenshots.retrieval --out docs
"""

from __future__ import annotations

import asyncio
import random
import re
import tempfile
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
    shot,
    wait,
)

SIZES = ((1200, 780), (900, 600))
PERCENT = re.compile(r"indexing (\d+) %")


def ledger(folder: Path, seed: int) -> Path:
    """~6 MB of plausible log lines: seconds of indexing, another text each time."""
    rng = random.Random(seed)
    places = ("Pier 4", "the north gate", "berth 12", "the fuel dock", "the ferry ramp")
    path = folder / f"harbour-log-{seed}.txt"
    path.write_text("\n".join(
        f"{rng.randint(1, 28):02d}.{rng.randint(1, 12):02d} {rng.randint(0, 23):02d}:"
        f"{rng.randint(0, 59):02d} vessel {rng.randint(100, 999)} cleared {rng.choice(places)}"
        f" with {rng.randint(2, 40)} crew, inspection {rng.choice(('passed', 'pending'))}"
        for _ in range(90_000)))
    return path


def main() -> None:
    args = arguments().parse_args()
    out = out_dir(args)

    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication, QWidget

    from app.context import AppContext
    from app.defaults import Defaults
    from ui.preferences import open_preferences

    _app, loop = qt_app("retrieval_shots", stylesheet=True)
    settings = scratch_settings()
    settings.defaults = Defaults(params=dict(GREEDY))
    ctx = AppContext.create(settings=settings)
    window = open_window(ctx, SIZES[0])
    window.move(0, 0)
    folder = Path(tempfile.mkdtemp())

    def screen_shot(widget: QWidget, path: Path) -> None:
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        QApplication.processEvents()
        g = widget.frameGeometry()
        image = QApplication.primaryScreen().grabWindow(0, g.x(), g.y(), g.width(),
                                                        g.height())
        if not image.save(str(path)):
            raise OSError(f"could not write {path}")
        print("saved", path, flush=True)

    async def each_look(take: Callable[[str, int, int], Awaitable[None]]) -> None:
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in SIZES:
                window.resize(w, h)
                await asyncio.sleep(0.5)
                await take(theme, w, h)

    async def scene() -> None:
        await load(ctx.bridge, args.model)
        dialog = open_preferences(settings, window, window.reload_model,
                                  [ctx.bridge.source or "bundled"])

        async def preferences(theme: str, w: int, _h: int) -> None:
            box = dialog.retrieval
            box.setCurrentIndex(box.findData("bundled"))
            dialog.move(window.geometry().center() - dialog.rect().center())
            await asyncio.sleep(0.5)
            screen_shot(window, out / f"screenshot-retrieval-preferences-{theme}-{w}.png")

        await each_look(preferences)
        dialog.reject()  # nothing saved: keyword only stays
        tab = window.current_tab()
        tab.input.setPlainText("Which vessels cleared Pier 4 with a pending inspection?")
        seeds = iter(range(1, 10))

        async def indexing(theme: str, w: int, _h: int) -> None:
            tab.chips.clear()
            tab.attach_files([str(ledger(folder, next(seeds)))])
            chip = tab.chips.chips[-1]
            await wait(lambda: (m := PERCENT.search(chip.label.text())) is not None
                       and 30 <= int(m.group(1)) <= 80, timeout=120)
            shot(window, out / f"screenshot-retrieval-indexing-{theme}-{w}.png")
            print("chip:", chip.label.text(), flush=True)
            await wait(lambda: chip.tokens is not None)  # no index left building at exit

        await each_look(indexing)
        tab.chips.clear()
        await ctx.bridge.shutdown(3.0)

    run(loop, scene())


if __name__ == "__main__":
    main()
