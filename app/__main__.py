"""`python -m app`: the desktop app, or `--cli` / `serve` (app/main.py parses which)."""

from app.main import entry

entry()
