"""A chat's title from its first message: one line, cut at a word, never a literal "…".

A title is the chat's name as saved, exported and used for file names; where a view has
too little room for it, the view elides it (Qt's elidedText), not the title itself."""

from __future__ import annotations

TITLE_MAX = 80
ELLIPSIS = "…"


def title_from_message(text: str, limit: int = TITLE_MAX) -> str:
    """The first non-empty line, whitespace collapsed, Markdown marks stripped from its
    ends, at most `limit` characters: a longer line is cut after its last whole word that
    fits (mid-word only if one word is longer than half of `limit`); "" for text with no
    visible characters."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    words = " ".join(line.split()).strip("#>*`_ ")
    if len(words) <= limit:
        return words
    cut = words[:limit]
    if words[limit] != " " and " " in cut and cut.rindex(" ") >= limit // 2:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,.;:-")


def whole_title(title: str, first_message: str) -> str:
    """`title`, or for one that BatchChat cut with a trailing "…" (before titles stopped
    carrying one) the title its first message gives now; a title the user typed is kept."""
    if not title.endswith(ELLIPSIS):
        return title
    fresh = title_from_message(first_message)
    stem = title[: -len(ELLIPSIS)].rstrip()
    return fresh if stem and fresh.startswith(stem) and len(fresh) > len(stem) else title
