"""Draft tokens from a row's own text (prompt lookup / n-gram): no second model, any model.

A row that is copying (code it was given to edit, a quoted passage, a list it repeats) has
written its last few tokens before, in its prompt or its output: the tokens that followed
them there are a good guess for what follows now. The target model then checks the guess
in one pass (engine/speculation.py). The index maps every n-gram (n from `max_n` down to
`min_n`) to where its most recent occurrence was followed, updated as tokens come, so a
lookup is a few dictionary reads whatever the length.
"""

from __future__ import annotations


class NgramDrafter:
    """Proposes up to k tokens that followed the most recent earlier occurrence of the
    text's last n tokens (the longest n that occurred before wins)."""

    __slots__ = ("min_n", "max_n", "_tokens", "_index")

    def __init__(self, tokens: list[int], min_n: int = 2, max_n: int = 4) -> None:
        if not 1 <= min_n <= max_n:
            raise ValueError(f"n-gram sizes must satisfy 1 <= min_n <= max_n, got {min_n}, {max_n}")
        self.min_n, self.max_n = min_n, max_n
        self._tokens: list[int] = []
        self._index: dict[tuple[int, ...], int] = {}
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    def extend(self, tokens: list[int]) -> None:
        """Tokens appended to the text (the prompt once, then each accepted token)."""
        toks, index = self._tokens, self._index
        for token in tokens:
            end = len(toks)  # the n-grams ending just before `token` are now followed by it
            for n in range(self.min_n, self.max_n + 1):
                if end >= n:
                    index[tuple(toks[end - n:end])] = end
            toks.append(token)

    def propose(self, k: int) -> list[int]:
        """Up to `k` draft tokens for what follows the text ([] when its last `min_n` tokens
        never occurred before)."""
        toks = self._tokens
        if k <= 0:
            return []
        for n in range(min(self.max_n, len(toks)), self.min_n - 1, -1):
            start = self._index.get(tuple(toks[len(toks) - n:]))
            if start is not None:
                return toks[start:start + k]
        return []
