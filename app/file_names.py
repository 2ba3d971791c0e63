"""A file name from a title (a chat's, a run's): safe on every OS, short, cut at a word."""

from __future__ import annotations

import re

NAME_MAX = 60  # characters, before the suffix
# Windows refuses these as a file's stem, whatever the suffix
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
             *(f"LPT{i}" for i in range(1, 10))}


def file_name(title: str, fallback: str = "chat", limit: int = NAME_MAX) -> str:
    """`title` as a file name without its suffix: characters no file system takes (and
    control characters) become " - " or "-" ("3/4" stays "3-4"), runs of spaces and dashes
    shrink, an ellipsis and dots at the ends go, and a name longer than `limit` is cut after
    its last whole word. `fallback` when nothing is left."""
    name = title.replace("…", " ")
    name = re.sub(r"(?<=\w)[/\\:](?=\w)", "-", name)  # 3/4, a:b inside a word
    name = re.sub(r'[<>:"/\\|?*\x00-\x1f\x7f]+', " - ", name)
    name = re.sub(r"\s+", " ", name)
    name = re.sub(r"(\s*-\s*){2,}", " - ", name)  # " - " marks in a row: one
    name = name.strip(" .-")
    if len(name) > limit:
        cut = name[:limit]
        if name[limit] != " " and " " in cut:
            cut = cut[: cut.rindex(" ")]
        name = cut.strip(" .-")
    if not name:
        return fallback
    if name.upper() in _RESERVED:
        name += f" {fallback}"
    return name
