"""Screenshots for docs/app.md (issue #52): images in a chat. No vision model's weights are
available offline, so the chat that sees the image is on a connection to a scripted
loopback server standing in for one (tests/ui/scripted_server.py: its answer is the
script below, not a model's); the request it gets carries the image as an image_url part.
The draft under it holds another pasted image as a chip. A second tab, on the bundled
text-only model, shows the refusal at the input with the draft and its image kept. Light
and dark, 1200x780 and 900x600. Run under Xvfb:

    Xvfb :26 -screen 0 1400x900x24 &
    DISPLAY=:26 python -m tools.screenshots.images --out docs
"""

from __future__ import annotations

import asyncio
import io

from tests.ui.scripted_server import ScriptedServer
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
QUESTION = "What does this chart show? One sentence."
ANSWER = ("Tokens per second for one to sixteen concurrent chats: throughput grows from "
          "about 38 to 310 tok/s as the batch fills, while each chat slows only a little.")


def chart_png() -> bytes:
    """A bar chart, as a user would screenshot one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    chats = ["1", "2", "4", "8", "16"]
    ax.bar(chats, [38, 74, 141, 236, 310], color="#1a73e8")
    ax.set_xlabel("concurrent chats")
    ax.set_ylabel("tokens / s")
    ax.set_title("Batched decoding throughput")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    return out.getvalue()


def photo_png() -> bytes:
    """A small 'photo' for the next draft: a gradient sky over a green field."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (480, 320))
    draw = ImageDraw.Draw(img)
    for y in range(320):
        colour = (90 + y // 4, 150 + y // 6, 235) if y < 200 else (60, 140 + (y - 200) // 3, 60)
        draw.line([(0, y), (480, y)], fill=colour)
    draw.ellipse((360, 40, 420, 100), fill=(255, 214, 90))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def main() -> None:
    args = arguments().parse_args()
    out = out_dir(args)

    from app.context import AppContext
    from app.defaults import Defaults
    from app.remote import Connection

    _app, loop = qt_app("images_shots", stylesheet=True)
    settings = scratch_settings()
    settings.defaults = Defaults(params=GREEDY | {"max_tokens": 80})
    ctx = AppContext.create(settings=settings)
    window = open_window(ctx, SIZES[0])
    chart, photo = chart_png(), photo_png()

    async def scene() -> None:
        await load(ctx.bridge, args.model)
        server = ScriptedServer([ANSWER])
        url = await server.start()
        settings.set_connections([Connection(f"{url}/v1", model="vision-stand-in",
                                             name="vision-box")])
        tab = window.current_tab()
        tab.set_backend("vision-box")
        window.set_tab_title(tab, "Chart question")
        tab.attach_image(chart)
        await wait(lambda: not tab.image_chips.reading)
        tab.input.setPlainText(QUESTION)
        if not tab.send_text(QUESTION):
            raise SystemExit(f"not sent: {tab.notice.text()}")
        await wait(lambda: not tab.conversation.is_busy)
        sent = server.requests[-1]["messages"][-1]["content"]
        print("request parts:", [p["type"] for p in sent])
        tab.attach_image(photo)  # the next draft: a pasted photo, as a chip
        tab.input.setPlainText("And this one?")
        await wait(lambda: not tab.image_chips.reading)

        local = window.new_tab()  # the bundled model reads text only: refused at the input
        window.set_tab_title(local, "Text-only model")
        local.attach_image(photo)
        await wait(lambda: not local.image_chips.reading)
        local.input.setPlainText("What is in this photo?")
        if local.send_text("What is in this photo?"):
            raise SystemExit("the text-only model took an image")
        print("refusal:", local.notice.text())
        for name, shown in (("images", tab), ("images-refused", local)):
            window.tabs.setCurrentWidget(shown)
            for theme in ("light", "dark"):
                window.set_theme(theme)
                for w, h in SIZES:
                    window.resize(w, h)
                    await asyncio.sleep(0.5)
                    bar = shown.messages.verticalScrollBar()
                    bar.setValue(bar.maximum())
                    await asyncio.sleep(0.3)
                    shot(window, out / f"screenshot-{name}-{theme}-{w}.png")
        await server.stop()
        await ctx.bridge.shutdown(3.0)

    run(loop, scene())


if __name__ == "__main__":
    main()
