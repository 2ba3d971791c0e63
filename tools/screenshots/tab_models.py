"""Screenshots for docs/app.md (issue #50): each tab on its own model. The default model is
the bundled one; the library has a second model file, the same model re-quantized as Q8_0
by gguf-py (tests/fleet_models.py), in an added folder. Two tabs ask the same question at
once, one on each model; then the second tab's picker is shown open, listing the default
model, the library's other models and the connections. Light and dark, 1200x780 and
900x600. Run under Xvfb:

    Xvfb :25 -screen 0 1400x900x24 &
    DISPLAY=:25 python -m tools.screenshots.tab_models --out docs
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
    from app.remote import Connection
    from tests.fleet_models import bundled_path, requantize

    folder = Path(tempfile.mkdtemp())
    requantize(bundled_path(), folder / "SmolLM2-135M-Instruct-Q8_0.gguf", "Q8_0")

    app, loop = qt_app("tab_models_shots", stylesheet=True)
    settings = scratch_settings()
    settings.user_presets["Greedy"] = dict(GREEDY)
    settings.defaults = Defaults(params=dict(GREEDY))
    settings.model_folders = [str(folder)]
    settings.set_connections([Connection("http://10.0.0.7:8000",
                                         model="Qwen/Qwen2.5-7B-Instruct", name="vllm-lab")])
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
        for tab in (first, second):
            reply = tab.conversation.messages[-1]
            print(tab.conversation.title, "|", reply.answered_by, "|", reply.content)
        picker = second.backend_picker
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in SIZES:
                window.resize(w, h)
                await asyncio.sleep(0.5)
                picker.showPopup()  # the list is a window of its own: the screen is shot
                await asyncio.sleep(0.5)
                app.processEvents()
                frame = window.frameGeometry()
                image = app.primaryScreen().grabWindow(0, frame.x(), frame.y(),
                                                       frame.width(), frame.height())
                path = out / f"screenshot-tab-models-picker-{theme}-{w}.png"
                if not image.save(str(path)):
                    raise OSError(f"could not write {path}")
                print("saved", path, flush=True)
                picker.hidePopup()
                await asyncio.sleep(0.2)
        await ctx.bridge.shutdown(3.0)

    run(loop, scene())


if __name__ == "__main__":
    main()
