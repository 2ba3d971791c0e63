"""`python -m batchchat`: the desktop app, or `--cli` / `serve` / `models` (app/main.py parses
which)."""

from batchchat.launcher import entry

entry()
