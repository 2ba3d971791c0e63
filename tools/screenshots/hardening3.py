"""Screenshots for docs/app.md, issue #46 round three (the window at 1200×780 and 900×600,
light and dark): a dock opened beside a chat with the settings panel (the sidebar and the
panel give way at 900 px, and say so), the simulator's chart with its key in the title, the
stats charts after three model loads (one readable name each), and the settings panel's
one label policy. The bundled model answers; the history is a temporary file. Run under
Xvfb:

    Xvfb :7 -screen 0 1920x1080x24 &
    DISPLAY=:7 python -m tools.screenshots.hardening3 --out docs
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from tools import app_start
from tools.app_start import arguments, load, open_window, out_dir, qt_app, run, wait

SIZES = ((1200, 780), (900, 600))


def main() -> None:
    args = arguments().parse_args()
    out = out_dir(args)

    from PySide6.QtCore import QPoint

    from app.context import AppContext
    from app.history.writer import HistoryWriter
    from app.settings import Settings

    _app, loop = qt_app("hardening3_shots")
    home = Path(tempfile.mkdtemp())
    settings = Settings(home / "settings.json")
    settings.show_settings_panel = True
    base = AppContext.create(settings=settings)
    ctx = AppContext(settings, base.bridge)
    window = open_window(ctx, SIZES[0], history=HistoryWriter.open(home / "history.db"))

    def shot(name: str) -> None:
        app_start.shot(window, out / f"screenshot-hardening3-{name}.png")

    async def looks(name: str, sizes=SIZES) -> None:  # noqa: ANN001
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in sizes:
                window.resize(w, h)
                await asyncio.sleep(0.6)
                shot(f"{name}-{theme}-{w}")

    async def scene() -> None:
        bridge = ctx.bridge
        await load(bridge, args.model)
        tab = window.current_tab()
        tab.panel.fields["max_tokens"].setValue(40)
        for text in ("Name three rivers in Europe.", "And one in Africa?"):
            tab.send_text(text)
            await wait(lambda: not tab.conversation.is_busy)
        other = window.new_tab()
        other.panel.fields["max_tokens"].setValue(30)
        other.send_text("Write a haiku about the sea.")
        await wait(lambda: not other.conversation.is_busy)
        window.workspace.set_front(tab.conversation)

        await looks("settings")  # the settings panel's labels: all beside or all above

        # the simulator dock beside the chat: at 900 the sidebar and the panel give way
        window.actions_by_name["simulator"].trigger()
        await asyncio.sleep(0.5)
        panel = window.sim_dock.panel
        form = panel.form
        form.arrival.setCurrentIndex(form.arrival.findData("burst"))
        form.burst_size.setValue(6)
        form.requests.setValue(6)
        form.tokens_min.setValue(8)
        form.tokens_max.setValue(24)
        form.seed.setValue(7)
        panel.start_button.click()
        await wait(lambda: panel.run is not None and not panel.is_running)
        await looks("simulator")
        chart = panel.summary.chart  # the latency chart alone: its key in the title
        for theme in ("light", "dark"):
            window.set_theme(theme)
            window.resize(1200, 780)
            await asyncio.sleep(0.6)
            path = out / f"screenshot-hardening3-simulator-chart-{theme}.png"
            chart.resize(max(chart.width(), 420), max(chart.height(), 220))
            if not chart.grab().save(str(path)):
                raise OSError(f"could not write {path}")
            print("saved", path, flush=True)
        window.sim_dock.close()

        # three loads within a few minutes: the stats charts name them once each
        window.actions_by_name["stats"].trigger()
        await asyncio.sleep(1.0)
        for _ in range(3):
            if not await window.load_model(args.model):
                raise SystemExit(bridge.message)
            tab.send_text("Say hello.")
            await wait(lambda: not tab.conversation.is_busy)
            await asyncio.sleep(2.0)
        area = window.stats_dock.widget()  # down to the first chart, named marks on it
        first = window.stats_dock.panel.charts.plots["tokens_per_s"]
        area.verticalScrollBar().setValue(first.mapTo(area.widget(), QPoint(0, 0)).y() - 8)
        await looks("stats-loads")
        await ctx.bridge.shutdown(3.0)

    run(loop, scene())


if __name__ == "__main__":
    main()
