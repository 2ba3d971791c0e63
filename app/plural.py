"""A count with its word: "1 chat", "2 chats" (messages never say "1 sessions")."""

from __future__ import annotations


def counted(n: int, word: str, plural: str | None = None) -> str:
    """`n` and `word`, or `plural` (default: word + "s") for any n but 1."""
    return f"{n} {word if n == 1 else plural or word + 's'}"
