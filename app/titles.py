"""A chat's title from its first message: short, one line, cut at a word."""

from __future__ import annotations

TITLE_MAX = 32


def title_from_message(text: str, limit: int = TITLE_MAX) -> str:
    """The first non-empty line, whitespace collapsed, at most `limit` characters (cut at a
    word boundary with an ellipsis when longer); "" for text with no visible characters."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    words = " ".join(line.split()).strip("#>*`_ ")
    if len(words) <= limit:
        return words
    cut = words[: limit - 1]
    if " " in cut and cut.rindex(" ") >= limit // 2:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,.;:-") + "…"
