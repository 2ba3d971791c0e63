"""Screenshots for docs/app.md (issue #50): the stats panel with two models. The default
model is the bundled one; the library has the same model re-quantized as Q8_0 by gguf-py
(tests/fleet_models.py) in an added folder. Two tabs answer at once, one on each model; the
stats panel's chooser shows the Q8_0 copy's own figures, and the status bar lists it beside
the default model with its Unload menu. Light and dark, 1200x780 and 900x600. Run under
Xvfb:

    Xvfb :25 -screen 0 1400x900x24 &
    DISPLAY=:25 python -m tools.screenshots.stats_models --out docs
"""

from __future__ import annotations

import asyncio
import tempfile
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

QUESTION = "What is a lighthouse for? Two sentences."
SIZES = ((1200, 780), (900, 600))


def main() -> None:
    args = arguments().parse_args()
    out = out_dir(args)

    from app.context import AppContext
    from app.defaults import Defaults
    from tests.fleet_models import bundled_path, requantize

    folder = Path(tempfile.mkdtemp())
    requantize(bundled_path(), folder / "SmolLM2-135M-Instruct-Q8_0.gguf", "Q8_0")

    app, loop = qt_app("stats_models_shots", stylesheet=True)
    settings = scratch_settings()
    settings.defaults = Defaults(params=dict(GREEDY))
    settings.model_folders = [str(folder)]
    ctx = AppContext.create(settings=settings)
    window = open_window(ctx)
    window.move(0, 0)

    async def scene() -> None:
        await load(ctx.bridge, args.model)
        first = window.current_tab()
        window.set_tab_title(first, "On the default model")
        second = window.new_tab()
        window.set_tab_title(second, "On the Q8_0 copy")
        other = next(m for m in ctx.bridge.other_models() if "Q8_0" in m)
        second.set_model(other)
        for tab in (first, second):
            tab.send_text(QUESTION)
        await wait(lambda: not first.conversation.is_busy and not second.conversation.is_busy)
        dock = window.stats_dock
        dock.show()
        await asyncio.sleep(0.5)
        combo = dock.panel.model_choice
        index = combo.findData(other)
        combo.setCurrentIndex(index)
        combo.activated.emit(index)
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in SIZES:
                window.resize(w, h)
                await asyncio.sleep(0.5)
                window.engine_status.show_others()
                dock.refresh(poll=True)
                await asyncio.sleep(0.5)
                app.processEvents()
                path = out / f"screenshot-stats-models-{theme}-{w}.png"
                if not window.grab().save(str(path)):
                    raise OSError(f"could not write {path}")
                print("saved", path, flush=True)
        await ctx.bridge.shutdown(3.0)

    run(loop, scene())


if __name__ == "__main__":
    main()
