"""Screenshots for docs/app.md (issue #51): a chat about an attached 30-page PDF on the
bundled model. The PDF (a harbour handbook made with reportlab, a fact planted on page 17)
is too long for the model's context, so the reply is given the question's passages and
shows its Sources under the answer; the draft below holds the PDF again beside a scanned
PDF refused at its chip, and the token count counts the file. Light and dark, 1200x780
and 900x600. Run under Xvfb:

    Xvfb :24 -screen 0 1400x900x24 &
    DISPLAY=:24 python -m tools.screenshots.attachments --out docs
"""

from __future__ import annotations

import asyncio
import random
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
    shot,
    wait,
)

SIZES = ((1200, 780), (900, 600))
FACT = "The night ferry's last departure from Pier 4 is at 23:40, every day of the year."
QUESTION = "When does the night ferry last leave Pier 4?"
TOPICS = ("berth allocation", "pilotage", "tug assistance", "cargo inspection", "waste "
          "reception", "crew changes", "bunkering", "mooring lines", "dredging notices",
          "weather warnings", "passenger terminals", "security zones")


def handbook(folder: Path) -> Path:
    """A 30-page PDF of plausible harbour rules, the FACT on page 17."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    rng = random.Random(51)
    path = folder / "harbour-handbook.pdf"
    c = canvas.Canvas(str(path), pagesize=A4)
    for page in range(1, 31):
        topic = TOPICS[page % len(TOPICS)]
        lines = [f"Harbour Operations Handbook - section {page}: {topic}", ""]
        for i in range(38):
            if page == 17 and i == 12:
                lines.append(FACT)
                continue
            lines.append(f"{page}.{i + 1} Vessels requesting {topic} notify the harbour office "
                         f"{rng.choice(('two', 'four', 'six', 'twelve'))} hours ahead on "
                         f"channel {rng.randint(9, 16)}.")
        y = 800
        for line in lines:
            c.drawString(56, y, line)
            y -= 20
        c.showPage()
    c.save()
    return path


def scanned(folder: Path) -> Path:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    path = folder / "signed-form-scan.pdf"
    c = canvas.Canvas(str(path), pagesize=A4)
    c.rect(72, 400, 420, 300, fill=1)
    c.showPage()
    c.save()
    return path


def main() -> None:
    args = arguments().parse_args()
    out = out_dir(args)

    from app.context import AppContext
    from app.defaults import Defaults

    _app, loop = qt_app("attachments_shots", stylesheet=True)
    settings = scratch_settings()
    greedy = GREEDY | {"max_tokens": 80, "repetition_penalty": 1.0}
    settings.defaults = Defaults(params=greedy)  # a new tab starts greedy: the same reply
    ctx = AppContext.create(settings=settings)
    window = open_window(ctx, SIZES[0])
    folder = Path(tempfile.mkdtemp())
    pdf, scan = handbook(folder), scanned(folder)

    async def scene() -> None:
        await load(ctx.bridge, args.model)
        tab = window.current_tab()
        window.set_tab_title(tab, "Harbour handbook")
        tab.attach_files([str(pdf)])
        await wait(lambda: not tab.chips.reading and tab.chips.chips[0].tokens is not None)
        tab.input.setPlainText(QUESTION)
        tab.send_text(QUESTION)
        await wait(lambda: not tab.conversation.is_busy)
        reply = tab.conversation.messages[-1]
        print("reply:", reply.content)
        print("stats:", reply.stats.summary() if reply.stats else reply.finish_reason)
        print("sources:", [c.where() for c in reply.citations])
        if not any(FACT in c.text for c in reply.citations):
            raise SystemExit("the planted fact's passage was not given to the model")
        # the next draft: the PDF again and a scan refused at its chip
        tab.attach_files([str(pdf), str(scan)])
        tab.input.setPlainText("And the first ferry in the morning?")
        await wait(lambda: not tab.chips.reading and tab.chips.chips[0].tokens is not None)
        await wait(lambda: tab.token_count.current and tab.token_count.size is not None)
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in SIZES:
                window.resize(w, h)
                await asyncio.sleep(0.5)
                bar = tab.messages.verticalScrollBar()
                bar.setValue(bar.maximum())  # the answer and its sources in view
                await asyncio.sleep(0.3)
                shot(window, out / f"screenshot-attachments-{theme}-{w}.png")
        await ctx.bridge.shutdown(3.0)

    run(loop, scene())


if __name__ == "__main__":
    main()
