"""Conversation memory as the stats panel words it: prefix-cache reuse, the KV budget, the disk
store. Derived only from `EngineStats` fields (docs/memory.md), formatted here so the widgets
just show text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.public import format_bytes

if TYPE_CHECKING:
    from engine.public import EngineStats

NONE = "–"


@dataclass(frozen=True, slots=True)
class MemoryFigures:
    """One text per line of the panel's Memory group, and the numbers behind them."""

    hit_rate: str  # "81% of tokens": share of admitted prompt tokens served from cache
    hits: str  # "12 of 15": requests that reused any token, of those admitted
    kv: str  # "312 MiB of 5.9 GiB": running requests' set-aside + cached prefixes, of budget
    running: str  # "40 MiB": the running requests' part
    cached: str  # "272 MiB · 4210 tok": the cached prefixes' part
    entries: str  # "6 (2 evicted)": cached prefixes, and how many were evicted so far
    disk: str  # "3 files · 41 MiB", or "none"
    disk_detail: str  # "5 saved, 2 loaded ..." (a tooltip: the line stays short)
    kv_detail: str  # how the budget was chosen, "default: 16 slots x 512 + ..." (a tooltip)
    kv_used_bytes: int
    kv_fraction: float  # of the budget; 0 when the engine reports no budget
    # "1.4 GiB of 1.7 GiB": the process's resident memory, of its bound (app/process_memory)
    process: str = NONE
    over_bound: bool = False

    def texts(self) -> tuple[tuple[str, str], ...]:
        """(panel key, text) for every line, in the panel's order."""
        return (("hit_rate", self.hit_rate), ("hits", self.hits), ("kv", self.kv),
                ("running", self.running), ("cached", self.cached),
                ("entries", self.entries), ("disk", self.disk), ("process", self.process))


def memory_figures(s: EngineStats, resident: int | None = None,
                   bound: int | None = None) -> MemoryFigures:
    """`resident`: the process's memory now; `bound`: what it should stay within."""
    used = s.kv_used_bytes
    budget = s.kv_budget_bytes
    # No lookups yet: nothing admitted, or the model runs without prefix reuse.
    looked = s.prefix_lookups > 0
    return MemoryFigures(
        hit_rate=f"{100 * s.prefix_hit_rate:.0f}% of tokens" if looked else NONE,
        hits=f"{s.prefix_hits} of {s.prefix_lookups}" if looked else NONE,
        kv=f"{format_bytes(used)} of {format_bytes(budget)}" if budget else NONE,
        running=format_bytes(max(s.kv_reserved_bytes, s.kv_running_bytes)),
        cached=f"{format_bytes(s.prefix_cached_bytes)} · {s.prefix_cached_tokens} tok",
        entries=f"{s.prefix_entries} ({s.prefix_evictions} evicted)",
        disk=_disk(s),
        disk_detail=(f"{s.prefix_disk_saves} saved, {s.prefix_disk_loads} loaded since the "
                     "engine started"),
        kv_detail=f"Budget {format_bytes(budget)}, {s.kv_budget_basis or 'as set'}." if budget
        else "",
        kv_used_bytes=used,
        kv_fraction=used / budget if budget else 0.0,
        process=_process(resident, bound),
        over_bound=resident is not None and bound is not None and resident > bound,
    )


def _process(resident: int | None, bound: int | None) -> str:
    if resident is None:
        return NONE
    if bound is None:
        return format_bytes(resident)
    return f"{format_bytes(resident)} of {format_bytes(bound)}"


def _disk(s: EngineStats) -> str:
    if not (s.prefix_disk_files or s.prefix_disk_saves or s.prefix_disk_loads):
        return "none"
    files = f"{s.prefix_disk_files} file{'' if s.prefix_disk_files == 1 else 's'}"
    return f"{files} · {format_bytes(s.prefix_disk_bytes)}"
