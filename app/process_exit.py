"""Leaving the process once everything is shut down, without MLX's static destructors.

MLX used from a worker thread (the engine's) can abort in its static destructors at
interpreter exit: "terminate called without an active exception", exit status 134 about
one run in five here (ml-explore/mlx#3126, fixed upstream after the mlx 0.32 we pin). The
window, the terminal chat and the server close their history and engine before they
return, so the entry points leave with os._exit after flushing what Python would.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing left to flush
            pass
    os._exit(code)
