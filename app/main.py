"""What a start asks for: `batchchat` (or `python -m batchchat`) opens the window, or `--cli`
the terminal; `batchchat serve …` runs the OpenAI-compatible API server alone (`batchchat
serve --help`); `batchchat models …` lists, shows and pulls models (`batchchat models
--help`). The window itself is handed in by the launcher (batchchat/launcher.py), so `app`
never imports `ui`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable

from app import speculative
from engine.public import ensure_preloads


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="batchchat", description=__doc__)
    p.add_argument("--model", default=None,
                   help='"bundled", a .gguf file, an mlx-lm model directory or a repo id '
                        "(default: the last model loaded, else bundled)")
    p.add_argument("--cli", action="store_true",
                   help="terminal chat instead of the window; it keeps no history (nothing "
                        "is saved, so --db does not go with it)")
    p.add_argument("--db", default=None, metavar="PATH",
                   help="the window's history database (default: $BATCHCHAT_DB, else "
                        "history.db in the data directory)")
    p.add_argument("--temperature", type=float, default=0.7, help="--cli only")
    p.add_argument("--max-tokens", type=int, default=512, help="--cli only")
    p.add_argument("--speculative", default=None, metavar="off|ngram|draft:PATH",
                   help="--cli only: speculative decoding (default "
                        f"{speculative.DEFAULT}); the window uses its setting "
                        "(Chat → Speculative decoding)")
    args = p.parse_args(argv)
    if args.speculative is not None:
        if not args.cli:
            p.error("--speculative goes with --cli; the window uses its setting "
                    "(Chat → Speculative decoding)")
        try:
            args.speculative = speculative.check(args.speculative)
        except ValueError as exc:
            p.error(f"argument --speculative: {exc}")
    if args.cli and args.db is not None:
        # Accepting it would promise a history that is never written.
        p.error("--db cannot be used with --cli: the terminal chat keeps no history")
    return args


def main(argv: list[str] | None = None, *,
         window: Callable[[argparse.Namespace], int] | None = None) -> int:
    """Run what `argv` asks for; `window` opens the window (the launcher's: ui/startup.py).
    Without one, only `serve`, `models` and the terminal chat can start."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        return run_server(argv[1:])
    if argv[:1] == ["models"]:
        from app.models.cli import main as models  # no MLX: reads headers only

        return models(argv[1:])
    if argv[:1] in (["ps"], ["load"], ["unload"]):  # a running server's models (issue #50)
        from app.fleet.cli import main as fleet  # no MLX: HTTP only

        return fleet(argv[0], argv[1:])
    args = prepare(argv)
    if args.cli or not _can_show_window():
        if not args.cli:
            print("No display found: starting the terminal chat (--cli)"
                  + (", which keeps no history: --db is not used." if args.db else "."),
                  file=sys.stderr)
        return run_cli(args)
    if window is None:  # a caller below the launcher: it has no window to open
        raise RuntimeError("app.main.main: the window is the launcher's (batchchat/launcher.py)")
    return window(args)


def prepare(argv: list[str] | None = None) -> argparse.Namespace:
    """What every start does first: the arguments, and logging."""
    ensure_preloads()  # before MLX loads: re-executes with OpenBLAS preloaded on Linux CPU
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return args


def run_server(argv: list[str]) -> int:
    ensure_preloads()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from app.server.serve import main as serve

    return serve(argv)


def run_cli(args: argparse.Namespace) -> int:
    """The terminal chat; a bad setting or a model that cannot be loaded is one line on
    stderr and a non-zero exit (like the window's banner), not a traceback."""
    from app.cli_chat import chat
    from engine.public import CpuOptions, ModelLoadError, SamplingParams, kv_budget_from_env

    try:
        params = SamplingParams(temperature=args.temperature, top_p=0.95,
                                max_tokens=args.max_tokens)
        cpu = CpuOptions.from_env()  # the engine's CPU switches (a bad value: exit 2)
        kv_budget_from_env()  # BATCHCHAT_KV_BUDGET_MB, checked before loading a model
    except ValueError as exc:
        print(f"batchchat: error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(chat(args.model or "bundled", params, cpu=cpu,
                         speculative=args.speculative or speculative.DEFAULT))
    except ModelLoadError as exc:
        print(f"batchchat: error: cannot load the model: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl+C quits the chat as an empty line does (engine stopped)
        print(file=sys.stderr)
    return 0


def _can_show_window() -> bool:
    if sys.platform != "linux" or os.environ.get("QT_QPA_PLATFORM"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
