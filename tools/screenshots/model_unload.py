"""Screenshots for docs/app.md (issue #50): unloading a model from the window while a reply
runs on it. The default model is the bundled one; the library has the same model
re-quantized as Q8_0 by gguf-py (tests/fleet_models.py) in an added folder. A tab on the
Q8_0 copy is writing a long reply when the status bar's Unload menu is used: the question
(let it finish, stop it, cancel). Light and dark, 1200x780 and 900x600. Run under Xvfb:

    Xvfb :25 -screen 0 1400x900x24 &
    DISPLAY=:25 python -m tools.screenshots.model_unload --out docs
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

QUESTION = "Write a long story about a lighthouse keeper."
SIZES = ((1200, 780), (900, 600))


def main() -> None:
    args = arguments().parse_args()
    out = out_dir(args)

    from app.context import AppContext
    from app.defaults import Defaults
    from tests.fleet_models import bundled_path, requantize

    folder = Path(tempfile.mkdtemp())
    requantize(bundled_path(), folder / "SmolLM2-135M-Instruct-Q8_0.gguf", "Q8_0")

    app, loop = qt_app("model_unload_shots", stylesheet=True)
    settings = scratch_settings()
    settings.defaults = Defaults(params=dict(GREEDY, max_tokens=4000))
    settings.model_folders = [str(folder)]
    ctx = AppContext.create(settings=settings)
    window = open_window(ctx)
    window.move(0, 0)

    async def scene() -> None:
        await load(ctx.bridge, args.model)
        tab = window.current_tab()
        window.set_tab_title(tab, "Story on the Q8_0 copy")
        other = next(m for m in ctx.bridge.other_models() if "Q8_0" in m)
        tab.set_model(other)
        tab.send_text(QUESTION)
        await wait(lambda: len(tab.conversation.messages) == 2
                   and len(tab.conversation.messages[-1].content) > 200)
        status = window.engine_status
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in SIZES:
                window.resize(w, h)
                status.show_others()
                task = status.unloader.unload(other)
                await wait(lambda: status.unloader.question is not None)
                await asyncio.sleep(0.8)
                app.processEvents()
                frame = window.frameGeometry()  # the question is a window of its own
                image = app.primaryScreen().grabWindow(0, frame.x(), frame.y(),
                                                       frame.width(), frame.height())
                path = out / f"screenshot-model-unload-{theme}-{w}.png"
                if not image.save(str(path)):
                    raise OSError(f"could not write {path}")
                print("saved", path, flush=True)
                status.unloader.question.buttons[None].click()  # Cancel: it goes on
                await task
        tab.conversation.stop()
        await ctx.bridge.shutdown(3.0)

    run(loop, scene())


if __name__ == "__main__":
    main()
