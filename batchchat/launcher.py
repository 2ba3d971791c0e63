"""The console script (`batchchat`) and `python -m batchchat`: app/main.py's start, given
the window to open when it asks for one (ui/startup.py). Only this module sees both `app`
and `ui`; `app` stays below `ui` (an import-linter contract)."""

from __future__ import annotations

import argparse
import sys

from app import main as app_main


def main(argv: list[str] | None = None) -> int:
    """What the command line asks for: the window, the terminal chat, `serve` or `models`."""
    return app_main.main(argv, window=run_window)


def run_window(args: argparse.Namespace) -> int:
    """The window (`python -m batchchat` without --cli)."""
    from ui.startup import run_window as start  # Qt and the widgets load only for the window

    return start(args)


def entry() -> None:
    """The console script and `python -m batchchat`: main(), then leave without MLX's static
    destructors (app/process_exit.py)."""
    from app.process_exit import exit_now

    try:
        code = main()
    except SystemExit as exc:  # argparse's --help and usage errors
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    exit_now(code)
