"""Event-loop lag with the stats panel open while N tabs stream (numbers in docs/app.md):

    python -m tools.measure.stats_run --model bundled --tabs 16 --max-tokens 128
    python -m tools.measure.stats_run --tabs 4 --screenshot docs/screenshot-stats.png
    python -m tools.measure.stats_run --model tiny --tabs 16 --max-tokens 1000   # issue #18 item 10

`--hidden` leaves the panel closed, for comparison; `--model tiny` is the tiny random-weight
test model (16 sequences at once); `--profile FILE` writes a cProfile of the UI thread.
"""

from __future__ import annotations

from tests.ui.lag_run import LagResult, stream_tabs
from tools.app_start import arguments, load, open_window, qt_app, run


def main() -> None:
    p = arguments(out=False)
    p.add_argument("--tabs", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--screenshot", default=None)
    p.add_argument("--shot-after", type=int, default=40)
    p.add_argument("--hidden", action="store_true", help="keep the stats panel closed")
    p.add_argument("--profile", default=None, help="write a cProfile of the run here")
    args = p.parse_args()

    from PySide6.QtCore import Qt

    from app.bridge import EngineBridge
    from app.context import AppContext
    from app.settings import Settings

    _app, loop = qt_app("stats_run", stylesheet=True)
    bridge = EngineBridge(_load_tiny) if args.model == "tiny" else None
    window = open_window(AppContext.create(settings=Settings(None), bridge=bridge),
                         (1400, 900))
    dock = window.stats_dock
    if not args.hidden:
        dock.show()
        window.resizeDocks([dock], [720], Qt.Orientation.Horizontal)

    async def session() -> LagResult:
        await load(window.ctx.bridge, args.model)
        result = await stream_tabs(window, args.tabs, args.max_tokens, args.screenshot,
                                   args.shot_after)
        await window.ctx.bridge.shutdown(3.0)
        return result

    profile = None
    if args.profile:
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
    r = run(loop, session())
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.profile)
    per = 1000 * dock.refresh_s / max(1, dock.refreshes)
    print(f"{args.tabs} tabs, panel {'hidden' if args.hidden else 'open'}: {r.tokens} tokens "
          f"in {r.wall_s:.1f} s ({r.tokens / r.wall_s:.1f} tok/s), {dock.refreshes} panel "
          f"refreshes ({per:.1f} ms each), {r.frames} UI flushes; event-loop lag of a 10 ms "
          f"timer: {r.summary()}; UI thread CPU {r.ui_cpu_s:.2f} s "
          f"({100 * r.ui_cpu_s / r.wall_s:.0f} % of the run)")


def _load_tiny(_source: str) -> object:
    """The tiny random-weight test model, 16 sequences at once (fast: the UI is the load)."""
    from engine import Engine, EngineConfig
    from tests.tiny_model import make_tiny_model

    tiny = make_tiny_model(context_length=16384)
    return Engine(tiny.model, tiny.tokenizer, eos_token_ids=[],
                  context_length=tiny.context_length,
                  config=EngineConfig(max_concurrent=16), description="tiny test model")


if __name__ == "__main__":
    main()
