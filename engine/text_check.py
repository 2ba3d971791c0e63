"""Text the tokenizer and SQLite can take (no heavy imports: the app uses it too)."""

from __future__ import annotations


def lone_surrogate(text: str) -> str | None:
    """None for text that is valid Unicode; else what is wrong, naming the character.

    A lone surrogate (U+D800..U+DFFF, e.g. from a broken paste or a JSON "\\ud800" escape)
    cannot be encoded as UTF-8, so neither the tokenizer nor SQLite can take it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"holds a lone surrogate (U+{ord(text[exc.start]):04X} at character "
                f"{exc.start}), which is not valid Unicode text")
    return None


def repair_text(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD; a split pair ("\\ud83d\\ude00")
    is joined into its character."""
    if lone_surrogate(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
