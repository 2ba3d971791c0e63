"""Conversation memory: the KV of finished (and prefilled) token sequences, kept for reuse.

Entries are keyed by the token ids whose KV they hold. A new prompt restores the longest
common prefix with any entry and prefills only the rest, which covers a chat's next turn,
Regenerate, edit-and-resend (up to the edit) and prompts that share a system prompt or
template. Least recently used entries go first when the KV budget needs room.

Safety: MLX updates an array object in place on slice assignment, so a restored cache must
never share array objects with an entry (a write at the restored length would change the
entry). `restore` hands out fresh slices; writes then copy the buffer on first use.
Kept: mlx-lm's plain `KVCache` layers (trimmable, one buffer per layer) and, for a hybrid
model (Qwen 3.5), its recurrent layers' `ArraysCache` (a conv state and a recurrent state,
the same size at any length). A recurrent state cannot be cut back to a shorter prefix, so
such a cache (`whole_entries`) reuses an entry only whole: every token of it a prefix of the
prompt, and the state used exactly as stored. Other cache types run without prefix reuse.
A state's arrays are shared between an entry and a restored cache: the model replaces them
(`cache[i] = ...`), it never writes into them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import ArraysCache, KVCache

from .cache import LayerCaches

# (layer, start, stop) -> that layer's keys and values at positions [start, stop)
ColumnReader = Callable[[int, int, int], tuple[mx.array, mx.array]]


def supports(cache: LayerCaches) -> bool:
    """Whether caches of this shape can be kept and restored here: plain KV layers, and
    recurrent ones beside at least one of them (its offset is the entry's length)."""
    return kv_only(cache) or (any(type(layer) is KVCache for layer in cache)
                              and all(type(layer) in (KVCache, ArraysCache) for layer in cache))


def kv_only(cache: LayerCaches) -> bool:
    """Whether every layer is a plain KV cache (one that may be cut to any shorter prefix;
    the disk store keeps only these)."""
    return bool(cache) and all(type(layer) is KVCache for layer in cache)


def cache_len(cache: LayerCaches) -> int:
    """Positions the cache holds (a KV layer's: a recurrent layer has no offset)."""
    return next(layer.offset for layer in cache if type(layer) is KVCache)


def cache_bytes(cache: LayerCaches) -> int:
    return sum(layer.nbytes for layer in cache)


@dataclass(eq=False, slots=True)
class CachedPrefix:
    tokens: np.ndarray  # int32 token ids whose KV `cache` holds, in order
    cache: LayerCaches  # offset == len(tokens); never written after insertion
    nbytes: int  # buffer bytes it keeps alive
    last_used: int  # LRU clock
    source: str = "memory"  # memory | disk: where it came from (stats only)

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True, slots=True)
class PrefixCacheStats:
    entries: int
    cached_tokens: int  # tokens held by all entries
    cached_bytes: int
    lookups: int  # requests admitted with a lookup
    hits: int  # of those, how many reused at least one token
    hit_tokens: int  # prompt tokens served from the cache
    lookup_tokens: int  # prompt tokens of all lookups (hit_tokens / this = token hit rate)
    evictions: int


class PrefixCache:
    """Engine-thread only. `nbytes` is what the entries keep alive (for the KV budget).
    `whole_entries`: the model keeps a recurrent state (engine.cache.fixed_state), so an
    entry is reused only whole, at exactly its length (never a common prefix cut from it)."""

    def __init__(self, whole_entries: bool = False) -> None:
        self.whole_entries = whole_entries
        self.entries: list[CachedPrefix] = []
        self.nbytes = 0  # kept up to date so other threads can read it without a lock
        self.num_tokens = 0
        self._clock = 0
        self.lookups = self.hits = self.hit_tokens = self.lookup_tokens = self.evictions = 0

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    # -- reuse --------------------------------------------------------------------------
    def longest(self, prompt: list[int]) -> tuple[CachedPrefix | None, int]:
        """The entry sharing the longest prefix with `prompt`, and how many tokens of it
        may be reused: at most all but the prompt's last token, which must be fed to get
        the first logits. With `whole_entries`, only an entry that is wholly such a prefix."""
        limit = len(prompt) - 1
        if limit <= 0 or not self.entries:
            return None, 0
        want = np.asarray(prompt[:limit], dtype=np.int32)
        best, best_n = None, 0
        for entry in self.entries:
            if self.whole_entries and entry.num_tokens > limit:
                continue  # its state holds tokens past the part it could share
            m = min(entry.num_tokens, limit)
            if m < best_n or m == 0:
                continue
            diff = np.flatnonzero(entry.tokens[:m] != want[:m])
            n = int(diff[0]) if diff.size else m
            if self.whole_entries and n < entry.num_tokens:
                continue  # diverges inside it: the state cannot be cut back
            newer = best is not None and entry.last_used > best.last_used
            if n > best_n or (n == best_n and newer):
                best, best_n = entry, n
        return (best, best_n) if best_n else (None, 0)

    def restore(self, prompt: list[int], count: bool = True) -> tuple[LayerCaches | None, int]:
        """A fresh cache holding the longest cached prefix of `prompt` (None if no entry
        shares one) and its length. `count`: record the lookup in the hit-rate figures."""
        _, cache, n = self.restore_entry(prompt, count)
        return cache, n

    def restore_entry(self, prompt: list[int], count: bool = True
                      ) -> tuple[CachedPrefix | None, LayerCaches | None, int]:
        """`restore`, with the entry the cache's views are of (None: none)."""
        entry, n = self.longest(prompt)
        if count:
            self.lookups += 1
            self.lookup_tokens += len(prompt)
            if entry is not None:
                self.hits += 1
                self.hit_tokens += n
        if entry is None:
            return None, None, 0
        entry.last_used = self._tick()
        # (n: the whole entry if whole)
        return entry, [_slice(layer, n) for layer in entry.cache], n

    # -- keeping ------------------------------------------------------------------------
    def insert(self, tokens: list[int], cache: LayerCaches, *, compact: bool = True,
               source: str = "memory") -> bool:
        """Keep `cache` (which holds the KV of `tokens[:len(cache)]`); the caller gives up
        its cache objects. `compact`: copy it into buffers of exactly its length, evaluated
        now (a finished cache's buffer is rounded up, and a row cut out of a batch would
        otherwise keep the whole batch buffer alive). False if nothing new was kept (empty,
        unsupported, or an entry already holds these tokens)."""
        if not supports(cache):
            return False
        n = cache_len(cache)
        if n == 0 or n > len(tokens):
            return False
        new = np.asarray(tokens[:n], dtype=np.int32)
        for entry in self.entries:
            # Already held: as a prefix of an entry, or, whole entries, exactly (a longer
            # one's state cannot serve a prompt that diverges after these tokens)
            held = entry.num_tokens == n if self.whole_entries else entry.num_tokens >= n
            if held and np.array_equal(entry.tokens[:n], new):
                entry.last_used = self._tick()
                return False
        # Entries that are prefixes of the new one are subsumed by it. (Whole entries too:
        # a chat's next turn uses the longer one, and each entry costs a whole state, so
        # a prompt that starts with the shorter but not the longer prefills again.)
        for entry in [e for e in self.entries
                      if e.num_tokens < n and np.array_equal(new[: e.num_tokens], e.tokens)]:
            self._remove(entry)
        if compact:
            cache = compacted(cache, n)
        entry = CachedPrefix(new, cache, cache_bytes(cache), self._tick(), source)
        self.entries.append(entry)
        self.nbytes += entry.nbytes
        self.num_tokens += entry.num_tokens
        return True

    def extend(self, tokens: list[int], read: ColumnReader) -> list[mx.array] | None:
        """Keep the KV of `tokens` by writing only the positions an entry lacks into that
        entry's buffer: the longest entry of plain KV layers holding a prefix of them whose
        buffer has room for all of them and not much more (`spare_allowed`): a prompt kept
        as it was prefilled (`alias`), its buffer sized for its reply (engine/cache.py
        `size_for`). `read(layer, start, stop)`: the keys and values
        of `tokens[start:stop]` in that layer. Returns the arrays written (to evaluate
        before the source changes), [] when an entry already holds them all, None when no
        entry can take them (the caller keeps a copy of the whole, `insert`).

        The entry's buffer is written by `mx.slice_update` into new array objects: where
        nothing else holds the buffer (the prompt's sequence went on as a batch row), MLX
        writes it in place; where something does (a cache restored from it, a sequence
        still decoding alone into it), MLX copies it first, so no holder sees a change."""
        if self.whole_entries:
            return None
        n = len(tokens)
        new = np.asarray(tokens, dtype=np.int32)
        base: CachedPrefix | None = None
        for entry in self.entries:
            m = entry.num_tokens
            if m >= n:
                if np.array_equal(entry.tokens[:n], new):
                    entry.last_used = self._tick()  # already held
                    return []
                continue
            if (base is None or m > base.num_tokens) and kv_only(entry.cache) and all(
                    n <= layer.keys.shape[2] <= n + spare_allowed(n) for layer in entry.cache
            ) and np.array_equal(entry.tokens, new[:m]):
                base = entry
        if base is None:
            return None
        m = base.num_tokens
        start = mx.array([0, 0, m, 0])
        cache: LayerCaches = []
        for i, layer in enumerate(base.cache):
            keys, values = read(i, m, n)
            out = KVCache()
            out.keys = mx.slice_update(layer.keys, keys, start, axes=(0, 1, 2, 3))
            out.values = mx.slice_update(layer.values, values, start, axes=(0, 1, 2, 3))
            out.offset = n
            cache.append(out)
        # it and every other entry holding a prefix of `tokens` are subsumed (as `insert`)
        for entry in [e for e in self.entries
                      if e.num_tokens < n and np.array_equal(new[: e.num_tokens], e.tokens)]:
            self._remove(entry)
        entry = CachedPrefix(new, cache, cache_bytes(cache), self._tick())
        self.entries.append(entry)
        self.nbytes += entry.nbytes
        self.num_tokens += entry.num_tokens
        return [a for layer in cache for a in (layer.keys, layer.values)]

    def evict_to(self, max_bytes: int) -> int:
        """Drop least recently used entries until at most `max_bytes` are kept; how many."""
        dropped = 0
        while self.entries and self.nbytes > max_bytes:
            self._remove(min(self.entries, key=lambda e: e.last_used))
            dropped += 1
        self.evictions += dropped
        return dropped

    def _remove(self, entry: CachedPrefix) -> None:
        self.entries.remove(entry)
        self.nbytes -= entry.nbytes
        self.num_tokens -= entry.num_tokens

    def stats(self) -> PrefixCacheStats:
        return PrefixCacheStats(len(self.entries), self.num_tokens, self.nbytes, self.lookups,
                                self.hits, self.hit_tokens, self.lookup_tokens, self.evictions)


def spare_allowed(n: int) -> int:
    """Unused positions an entry of `n` may keep in its buffer (`extend`): an eighth, or 16.
    Buffers of mlx-lm's 256-position growth kept as they were held 36 entries in the
    soak's prefix budget where exact ones held 47 (bench/soak.py)."""
    return max(16, n // 8)


def compacted(cache: LayerCaches, n: int) -> LayerCaches:
    """The first `n` positions in new buffers of exactly that size, evaluated now."""
    out = [_slice(layer, n, contiguous=True) for layer in cache]
    mx.eval([_arrays(layer) for layer in out])
    return out


def _arrays(layer: KVCache | ArraysCache) -> list[mx.array]:
    if type(layer) is ArraysCache:
        return [a for a in layer.cache if a is not None]
    return [layer.keys, layer.values]


def alias(cache: LayerCaches) -> LayerCaches:
    """New cache objects over the same arrays, frozen at the current length: an entry for a
    sequence that goes on decoding. Safe because its owner only ever writes at positions
    past that length (MLX's in-place slice writes then leave the entry's part as it was),
    and replaces a recurrent state's arrays rather than write into them."""
    out = []
    for layer in cache:
        if type(layer) is ArraysCache:
            out.append(_state(layer))
            continue
        frozen = KVCache()
        frozen.keys, frozen.values, frozen.offset = layer.keys, layer.values, layer.offset
        out.append(frozen)
    return out


def _state(layer: ArraysCache, copy: bool = False) -> ArraysCache:
    """A recurrent layer's state in a new cache object, outside any batch (no padding or
    lengths); `copy`: in buffers of its own (a row extracted from a batch is a view that
    would keep the whole batch's state alive). x * 1 is an exact copy."""
    out = ArraysCache(len(layer.cache))
    out.cache = [a * 1 if copy and a is not None else a for a in layer.cache]
    return out


def _slice(layer: KVCache | ArraysCache, n: int,
           contiguous: bool = False) -> KVCache | ArraysCache:
    """The first `n` positions of `layer` as a new cache with its own array objects
    (views of the same buffer, or a copy of exactly that size). A recurrent layer is
    taken whole: its state is at the cache's length, which `n` then is."""
    if type(layer) is ArraysCache:
        return _state(layer, copy=contiguous)
    out = KVCache()
    out.keys, out.values = layer.keys[..., :n, :], layer.values[..., :n, :]
    if contiguous:
        out.keys, out.values = mx.contiguous(out.keys), mx.contiguous(out.values)
    out.offset = n
    return out
