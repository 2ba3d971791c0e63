"""The app's stylesheet, from resources/stylesheet.qss."""

from __future__ import annotations

from importlib.resources import files


def load_stylesheet() -> str:
    try:
        return (files("resources") / "stylesheet.qss").read_text(encoding="utf-8")
    except OSError:
        return ""
