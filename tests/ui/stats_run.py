"""Event-loop lag with the stats panel open while N tabs stream (numbers in docs/app.md):

    python -m tests.ui.stats_run --model bundled --tabs 16 --max-tokens 128
    python -m tests.ui.stats_run --model bundled --tabs 4 --screenshot docs/screenshot-stats.png

`--hidden` leaves the panel closed, for comparison.
"""

from __future__ import annotations

import argparse

from tests.ui.lag_run import LagResult, stream_tabs


def main() -> None:
    from engine.blas import ensure_fast_blas

    ensure_fast_blas()
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="bundled")
    p.add_argument("--tabs", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--screenshot", default=None)
    p.add_argument("--shot-after", type=int, default=40)
    p.add_argument("--hidden", action="store_true", help="keep the stats panel closed")
    args = p.parse_args()

    from PySide6.QtCore import Qt

    from app.context import AppContext
    from app.settings import Settings
    from ui.event_loop import make_app, make_loop
    from ui.main_window import MainWindow
    from ui.style import load_stylesheet

    app = make_app(["stats_run"])
    app.setStyleSheet(load_stylesheet())
    loop = make_loop(app)
    window = MainWindow(AppContext.create(settings=Settings(None)))
    window.resize(1400, 900)
    window.show()
    dock = window.stats_dock
    if not args.hidden:
        dock.show()
        window.resizeDocks([dock], [720], Qt.Orientation.Horizontal)

    async def run() -> LagResult:
        if not await window.ctx.bridge.load(args.model):
            raise SystemExit(window.ctx.bridge.message)
        result = await stream_tabs(window, args.tabs, args.max_tokens, args.screenshot,
                                   args.shot_after)
        await window.ctx.bridge.shutdown(3.0)
        return result

    with loop:
        r = loop.run_until_complete(run())
    per = 1000 * dock.refresh_s / max(1, dock.refreshes)
    print(f"{args.tabs} tabs, panel {'hidden' if args.hidden else 'open'}: {r.tokens} tokens "
          f"in {r.wall_s:.1f} s ({r.tokens / r.wall_s:.1f} tok/s), {dock.refreshes} panel "
          f"refreshes ({per:.1f} ms each), {r.frames} UI flushes; event-loop lag over "
          f"{r.samples} samples of a 10 ms timer: p50 {r.p50_ms:.1f} ms, "
          f"p99 {r.p99_ms:.1f} ms, max {r.max_ms:.1f} ms")


if __name__ == "__main__":
    main()
