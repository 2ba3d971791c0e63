"""The KV memory policy: every reservation, reuse, keep and eviction of KV goes through here.

What running requests set aside plus what cached prefixes keep stays within one budget, and
cached prefixes are evicted first (least recently used). Admitted requests start from the
longest cached prefix of their prompt (in memory, or in a file saved before a restart);
prefilled prompts and finished requests' KV become prefixes for later requests. Issue #27:
one object instead of the same arithmetic at admission, prefilled prompts and finishes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import KVCache

from . import cache as kv
from .cache import LayerCaches
from .kv_arena import ArenaKVCache
from .kv_quant import KvPacking
from .prefix_cache import CachedPrefix, PrefixCache, alias
from .prefix_store import PrefixStore, fingerprint
from .sequence import Sequence
from .slot_cache import SlotKVCache

log = logging.getLogger(__name__)


def wants_kv(seq: Sequence) -> bool:
    """Whether a finished sequence's KV is worth keeping: not after an error (the cache may
    be half-written) or a shutdown (nothing will use it)."""
    return seq.finish_reason not in ("error", "shutdown")


def open_store(directory: str | None, model: nn.Module, fast_cpu_kernels: bool,
               max_bytes: int, packing: KvPacking | None = None,
               rope: str = "") -> PrefixStore | None:
    """The files that keep cached prefixes across restarts (None: no directory, or it
    cannot be used: an optional speed-up, so the engine runs without it). `rope`: what
    the engine chose of the model's RoPE that its weights do not say (engine/longrope.py
    LongRopeChoice.tag), so keys rotated otherwise are never read back."""
    if not directory:
        return None
    # The CPU kernels change the last bits of SiLU and softmax, hence of the KV.
    model_id = fingerprint(model, f"cpu_kernels={fast_cpu_kernels}{rope}")
    try:
        return PrefixStore(Path(directory), model_id, max_bytes, packing)
    except OSError as exc:
        log.warning("KV cache across restarts is off: cannot use %s: %s", directory, exc)
        return None


class KvPolicy:
    def __init__(self, budget: int, per_token: int, context_length: int,
                 prefix: PrefixCache | None, store: PrefixStore | None = None,
                 basis: str = "", prefix_budget: int | None = None,
                 per_sequence: int = 0) -> None:
        self.budget = budget  # bytes for running requests and cached prefixes together
        # ...of which cached prefixes keep at most this (None: all of it): a long request
        # may need a whole context, a cache that large would hold it for good
        self.prefix_budget = budget if prefix_budget is None else min(prefix_budget, budget)
        self.basis = basis  # how the budgets were chosen, in words (engine/kv_memory.py)
        self.per_token = per_token  # KV bytes one token takes in every layer
        # a hybrid model's recurrent state, the same size at any length (kv_memory.
        # state_bytes): a running sequence holds it beside its KV, so it is in its need
        self.per_sequence = per_sequence
        self.context_length = context_length
        self.prefix = prefix  # None: no prefix reuse (off, or a model it cannot keep)
        self.store = store  # cached prefixes saved across restarts (None: not kept)
        self.reserved = 0  # bytes set aside by admitted requests
        # bytes the decode batch's buffers hold beyond their rows' set-asides (rows as wide
        # as the longest; DecodeBatch.beyond_rows, set after each tick): memory the
        # set-asides do not count, so it is taken from the budget's room like them
        self.padding = 0
        # bytes of the decode batch's empty rows while prompts prefill (DecodeBatch.
        # beyond_rows): made ahead for those prompts within the free room, so a request
        # admitted later must not take that room too (cached prefixes kept since may: the
        # rows are then cut, engine_core._count_batch_buffers)
        self.spare = 0

    # -- running requests ---------------------------------------------------------------
    def need(self, num_prompt_tokens: int, max_tokens: int) -> int:
        """KV bytes a request sets aside while it runs: its longest possible sequence, plus
        one allocation step (mlx-lm's caches grow 256 positions at a time), plus its fixed
        state (hybrid models)."""
        tokens = min(self.context_length, num_prompt_tokens + max_tokens)
        return self.per_token * (tokens + KVCache.step) + self.per_sequence

    def refusal(self, num_prompt_tokens: int, max_tokens: int) -> str | None:
        """Why a request can never fit in the budget, and what would help; None if it can.
        When even the prompt with one new token does not fit, a lower max_tokens cannot
        help: only a shorter prompt or a larger budget can."""
        need = self.need(num_prompt_tokens, max_tokens)
        if need <= self.budget:
            return None
        bigger = ("raise the KV budget (BATCHCHAT_KV_BUDGET_MB, `batchchat serve "
                  "--kv-budget-mb`, or EngineConfig.kv_budget_bytes)")
        least = self.need(num_prompt_tokens, 1)
        state = (f", {_mib(self.per_sequence)} of it the model's recurrent state"
                 if self.per_sequence else "")
        if least > self.budget:
            return (f"the prompt ({num_prompt_tokens} tokens) needs {_mib(least)} of KV cache"
                    f"{state} but the KV budget is {_mib(self.budget)}: shorten the prompt or "
                    f"{bigger}")
        fits = ((self.budget - self.per_sequence) // self.per_token - KVCache.step
                - num_prompt_tokens)
        return (f"this request could need {_mib(need)} of KV cache ({num_prompt_tokens} prompt "
                f"+ {max_tokens} new tokens{state}) but the KV budget is {_mib(self.budget)}: set "
                f"max_tokens to at most {fits}, shorten the prompt, or {bigger}")

    def reserve(self, seq: Sequence) -> bool:
        """Set `seq`'s need aside, or say False when it does not fit now (the scheduler's
        admission test)."""
        need = self.need(seq.num_prompt_tokens, seq.params.max_tokens)
        if self.reserved + self.padding + self.spare + need > self.budget:
            return False
        seq.kv_reserved = need
        self.reserved += need
        return True

    def start(self, admitted: list[Sequence], new_cache: Callable[[], LayerCaches]) -> None:
        """Give each admitted request its cache: the longest cached prefix of its prompt, or
        a new one. Then cached prefixes give way to the new reservations."""
        # the id of the entry each restored from (None: none); ids, not the entries, so
        # an entry that gives way is not held here (its ids stay distinct from the kept
        # entries', all alive together before the eviction)
        sources: list[int | None] = []
        for seq in admitted:
            source, cache, n = self._restore(seq.prompt_tokens)
            seq.cache = cache if cache is not None else new_cache()
            seq.num_cached = seq.cached_tokens = n
            sources.append(None if source is None else id(source))
            del source
        self.evict()
        # only when some prompt restored a prefix: most admissions restore none
        restored = self.prefix is not None and any(s is not None for s in sources)
        kept = {id(e) for e in self.prefix.entries} if restored else set()
        for seq, source in zip(admitted, sources, strict=True):
            # one buffer for the prompt and its reply's first positions (within its share);
            # after the eviction, so a restored prefix that gave way goes a layer at a time
            gave_way = source is not None and source not in kept
            kv.size_for(seq.cache, seq.num_prompt_tokens
                        + min(seq.params.max_tokens, KVCache.step), gave_way=gave_way)

    def free_bytes(self) -> int:
        """What the budget has beside the admitted requests' shares (and the batch's
        padding beyond them) and the cached prefixes."""
        cached = self.prefix.nbytes if self.prefix is not None else 0
        return self.budget - self.reserved - self.padding - cached

    def release(self, seq: Sequence) -> None:
        """An admitted request ended: its share is free again."""
        self.reserved -= seq.kv_reserved

    # -- cached prefixes ----------------------------------------------------------------
    def keep_prompts(self, ready: list[Sequence]) -> list[Sequence]:
        """Prompts now fully in cache are kept as prefixes at once (`ready`, returned), so
        requests sharing them (a system prompt, a template) reuse them while these still
        decode."""
        for seq in ready:
            if seq.cache is not None:
                kv.fit_growth(seq.cache)
        if self.prefix is not None:
            for seq in ready:
                if not seq.is_finished and seq.num_cached > seq.cached_tokens:
                    self.prefix.insert(seq.prompt_tokens, alias(seq.cache), compact=False)
            self.evict()
        return ready

    def keep_finished(self, seq: Sequence, cache: LayerCaches) -> None:
        """A finished request's KV (prompt and every token fed after it) becomes a prefix
        for later requests."""
        if self.prefix is not None and wants_kv(seq):
            self.prefix.insert(seq.prompt_tokens + seq.output_tokens, cache)
            self.evict()

    def keep_row(self, seq: Sequence, batch: LayerCaches, row: int) -> list[mx.array] | None:
        """A finished slot row's KV (prompt and every token fed after it) kept as a prefix
        by writing only what its prompt's entry lacks into that entry's buffer
        (`PrefixCache.extend`): the arrays written (evaluated by the caller before the rows
        move), or None when it must be copied out whole (`keep_finished`)."""
        if self.prefix is None or not wants_kv(seq) or not isinstance(
                batch[0], SlotKVCache | ArenaKVCache):
            return None
        tokens = (seq.prompt_tokens + seq.output_tokens)[:batch[0].lengths[row]]
        written = self.prefix.extend(tokens, lambda i, a, b: batch[i].columns(row, a, b))
        if written is not None:
            self.evict()
        return written

    def save(self, tokens: list[int]) -> int:
        """Save the longest cached prefix of `tokens` to disk; how many tokens it holds (0:
        nothing cached, no disk store, or it could not be written: logged)."""
        if self.prefix is None or self.store is None:
            return 0
        entry, n = self.prefix.longest(list(tokens) + [-1])  # + [-1]: all of them may match
        if entry is None:
            return 0
        return n if self.store.save(entry.tokens[:n], entry.cache) else 0

    def evict(self) -> None:
        """Cached prefixes give way until everything fits, and they fit their own part
        (after any change to either)."""
        if self.prefix is not None:
            self.prefix.evict_to(min(self.budget - self.reserved - self.padding,
                                     self.prefix_budget))

    def _restore(self, prompt: list[int]) -> tuple[CachedPrefix | None, LayerCaches | None, int]:
        """The longest cached prefix of `prompt`, from memory or, when a saved file holds
        more of it, from disk (the file then becomes a memory entry too): its entry, a
        cache of views of it, and its length."""
        if self.prefix is None:
            return None, None, 0
        if self.store is not None:
            saved, n = self.store.longest(prompt)
            if saved is not None and n > self.prefix.longest(prompt)[1]:
                cache = self.store.load(saved)
                if cache is not None:
                    self.prefix.insert(saved.tokens.tolist(), cache, compact=False,
                                       source="disk")
        return self.prefix.restore_entry(prompt)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n < 10 << 20 else f"{n / (1 << 20):.0f} MiB"
