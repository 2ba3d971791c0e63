"""Keep the process's resident memory under a limit the app sets (issue #46 item 14).

Why: the KV budget counts what requests set aside and what cached prefixes keep, but not
all a busy engine holds. A decode batch's buffers are as wide as their longest row, a
prompt's KV is briefly in two places as it joins, a prefill pass has its activations, and
glibc keeps freed memory resident between give-backs. In a long 8-chat session in the
window these went 170-250 MiB past the process's bound (resident at start + KV budget +
512 MiB) once the chats reached ~2,000 tokens (docs/memory.md). Accounting for each of
them ahead of time either emptied the prefix cache long before memory was short (40 % more
compute) or needed a new KV layout; this reads the memory itself instead.

How: between two ticks, where RSS is within HEADROOM of the limit, glibc's freed memory
and MLX's buffer cache go back to the system (at most every GIVE_BACK_S); if RSS is still
that close, cached prefixes give way (least recently used first) by as much as it is
over. Their cap rises back as RSS falls. Running requests are never touched: a prefix
given away is computed again when its chat goes on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import mlx.core as mx

from . import cpu_memory
from .kv_policy import KvPolicy

# How far under the limit the engine keeps RSS between ticks: what one tick may add on top
# (a prefill chunk's activations, a finished row's copy, a join's copies, freed memory not
# yet given back). 192 and 256 MiB let rounds of the window's session pass the bound by
# 70-150 MiB (docs/memory.md).
HEADROOM = 320 << 20
# Giving memory back costs the engine thread 20-300 ms (and the pages fault in again when
# reused): at most this often while RSS is close to the limit, and at most every
# GIVE_BACK_OVER_S while it is over the limit itself.
GIVE_BACK_S = 0.5
GIVE_BACK_OVER_S = 0.1
RELAX_S = 1.0  # the prefixes' cap rises at most this often (each rise: half the room)


@dataclass
class PressureStats:
    """What the limit did, for the stats: how often it gave memory back, how many bytes of
    cached prefixes it took, and the prefixes' cap it holds now (None: none)."""

    give_backs: int = 0
    evicted_bytes: int = 0
    prefix_cap: int | None = None


class MemoryLimit:
    """One engine's watch over the process's RSS (engine thread only)."""

    def __init__(self, limit_bytes: int | None = None) -> None:
        self.limit_bytes = limit_bytes  # None: no limit (nothing is read)
        self.stats = PressureStats()
        self._given_back_at = -GIVE_BACK_S
        self._relaxed_at = 0.0

    def check(self, memory: KvPolicy, now: float | None = None) -> bool:
        """Between two ticks (every tick: RSS is one read of /proc, ~10 us): hold RSS under
        the limit less HEADROOM (see the module); True if it acted."""
        limit = self.limit_bytes
        if limit is None:
            cpu_memory.tighten(False)  # (a limit taken away while memory was short)
            return False
        rss = cpu_memory.resident_bytes()
        if rss is None:
            return False
        keep = limit - HEADROOM
        now = time.monotonic() if now is None else now
        if rss <= keep:
            if now - self._relaxed_at >= RELAX_S:
                self._relaxed_at = now
                self._relax(memory, keep - rss)
            return False
        cpu_memory.tighten(True)  # freed memory stops staying resident (until relaxed)
        if self._give_back(now, GIVE_BACK_OVER_S if rss > limit else GIVE_BACK_S):
            rss = cpu_memory.resident_bytes() or rss
            if rss <= keep:
                return True
        cached = memory.prefix.nbytes if memory.prefix is not None else 0
        if not cached:
            return True
        # Prefixes give way by what RSS is over: the freed memory is what the next ticks'
        # buffers are made from, so RSS stops rising even before it is given back.
        memory.pressure_cap = self.stats.prefix_cap = max(0, cached - (rss - keep))
        memory.evict()
        self.stats.evicted_bytes += cached - (memory.prefix.nbytes if memory.prefix else 0)
        return True

    def _relax(self, memory: KvPolicy, room: int) -> None:
        """RSS is under the mark by `room`: the prefixes' cap rises by half of it (half:
        what they take back is not all that a tick adds), and goes once past their own."""
        if room >= HEADROOM:
            cpu_memory.tighten(False)  # well under: freed memory kept for reuse again
        cap = memory.pressure_cap
        if cap is None or room < HEADROOM // 4:
            return
        cap += room // 2
        memory.pressure_cap = None if cap >= memory.prefix_budget else cap
        self.stats.prefix_cap = memory.pressure_cap

    def _give_back(self, now: float, every: float) -> bool:
        """MLX's buffer cache and glibc's freed memory back to the system, if not given back
        in the last `every` seconds; True if it was."""
        if now - self._given_back_at < every:
            return False
        self._given_back_at = now
        mx.clear_cache()
        cpu_memory.give_back_freed_memory()
        self.stats.give_backs += 1
        return True
