"""Event-loop lag while N tabs stream at once in the real window (numbers in docs/app.md);
the driver is tests/ui/lag_run.py's `stream_tabs`, which the lag tests run on the tiny model:

    python -m tools.measure.lag_run --model bundled --tabs 8 --max-tokens 96
    python -m tools.measure.lag_run --model bundled --tabs 4 --screenshot docs/screenshot-tabs.png
"""

from __future__ import annotations

from tests.ui.lag_run import LagResult, stream_tabs
from tools.app_start import arguments, load, open_window, qt_app, run


def main() -> None:
    p = arguments(out=False)
    p.add_argument("--tabs", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--screenshot", default=None)
    p.add_argument("--shot-after", type=int, default=40)
    args = p.parse_args()

    from app.context import AppContext
    from app.settings import Settings

    _app, loop = qt_app("lag_run", stylesheet=True)
    window = open_window(AppContext.create(settings=Settings(None)), size=None)

    async def session() -> LagResult:
        await load(window.ctx.bridge, args.model)
        result = await stream_tabs(window, args.tabs, args.max_tokens, args.screenshot,
                                   args.shot_after)
        await window.ctx.bridge.shutdown(3.0)
        return result

    r = run(loop, session())
    print(f"{args.tabs} tabs, {r.tokens} tokens in {r.wall_s:.1f} s "
          f"({r.tokens / r.wall_s:.1f} tok/s), {r.frames} UI flushes; event-loop lag of a "
          f"10 ms timer: {r.summary()}; UI thread CPU {r.ui_cpu_s:.2f} s "
          f"({100 * r.ui_cpu_s / r.wall_s:.0f} % of the run)")


if __name__ == "__main__":
    main()
