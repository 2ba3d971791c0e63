"""The KV memory policy: what running requests set aside plus what cached prefixes keep stays
within one budget, and cached prefixes are evicted first (issue #27: one object instead of
the same arithmetic in the admission, the prefilled prompts and the finished requests)."""

from __future__ import annotations

from mlx_lm.models.cache import KVCache

from .prefix_cache import PrefixCache
from .sequence import Sequence


class KvPolicy:
    def __init__(self, budget: int, per_token: int, context_length: int,
                 prefix: PrefixCache | None) -> None:
        self.budget = budget  # bytes for running requests and cached prefixes together
        self.per_token = per_token  # KV bytes one token takes in every layer
        self.context_length = context_length
        self.prefix = prefix
        self.reserved = 0  # bytes set aside by admitted requests

    def need(self, num_prompt_tokens: int, max_tokens: int) -> int:
        """KV bytes a request sets aside while it runs: its longest possible sequence, plus
        one allocation step (mlx-lm's caches grow 256 positions at a time)."""
        tokens = min(self.context_length, num_prompt_tokens + max_tokens)
        return self.per_token * (tokens + KVCache.step)

    def reserve(self, seq: Sequence) -> bool:
        """Set `seq`'s need aside, or say False when it does not fit now."""
        need = self.need(seq.num_prompt_tokens, seq.params.max_tokens)
        if self.reserved + need > self.budget:
            return False
        seq.kv_reserved = need
        self.reserved += need
        return True

    def release(self, seq: Sequence) -> None:
        """An admitted request ended: its share is free again."""
        self.reserved -= seq.kv_reserved

    def evict(self) -> None:
        """Cached prefixes give way until everything fits (after any change to either)."""
        if self.prefix is not None:
            self.prefix.evict_to(self.budget - self.reserved)
