"""Conversation memory as the stats panel words it: prefix-cache reuse, the KV budget, the disk
store. Derived only from `EngineStats` fields (docs/memory.md), formatted here so the widgets
just show text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine import EngineStats

NONE = "–"


def format_bytes(n: int) -> str:
    """Binary units, three significant figures at most: "512 B", "46 KiB", "5.9 GiB"."""
    value, unit = float(n), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    if unit == "B" or value >= 10:
        return f"{value:.0f} {unit}"
    return f"{value:.1f} {unit}"


@dataclass(frozen=True, slots=True)
class MemoryFigures:
    """One text per line of the panel's Memory group, and the numbers behind them."""

    hit_rate: str  # "81% · 12 of 15 hit": token share, then requests that reused any
    cached: str  # "4210 tok · 272 MiB · 6 entries"
    evictions: str
    kv: str  # "312 MiB of 5.9 GiB": running requests' set-aside + cached prefixes
    kv_split: str  # "40 MiB / 272 MiB" (running / cached)
    disk: str  # "3 files · 41 MiB · 5 saved, 2 loaded", or "none"
    kv_used_bytes: int
    kv_fraction: float  # of the budget; 0 when the engine reports no budget

    def texts(self) -> tuple[tuple[str, str], ...]:
        """(panel key, text) for every line."""
        return (("hit_rate", self.hit_rate), ("cached", self.cached),
                ("evictions", self.evictions), ("kv", self.kv), ("kv_split", self.kv_split),
                ("disk", self.disk))


def memory_figures(s: EngineStats) -> MemoryFigures:
    used = s.kv_used_bytes
    budget = s.kv_budget_bytes
    return MemoryFigures(
        hit_rate=_hit_rate(s),
        cached=(f"{s.prefix_cached_tokens} tok · {format_bytes(s.prefix_cached_bytes)} · "
                f"{s.prefix_entries} {'entry' if s.prefix_entries == 1 else 'entries'}"),
        evictions=str(s.prefix_evictions),
        kv=f"{format_bytes(used)} of {format_bytes(budget)}" if budget else NONE,
        kv_split=(f"{format_bytes(s.kv_reserved_bytes)} / "
                  f"{format_bytes(s.prefix_cached_bytes)}"),
        disk=_disk(s),
        kv_used_bytes=used,
        kv_fraction=used / budget if budget else 0.0,
    )


def _hit_rate(s: EngineStats) -> str:
    if not s.prefix_lookups:
        return NONE  # nothing admitted yet, or the model runs without prefix reuse
    return f"{100 * s.prefix_hit_rate:.0f}% · {s.prefix_hits} of {s.prefix_lookups} hit"


def _disk(s: EngineStats) -> str:
    if not (s.prefix_disk_files or s.prefix_disk_saves or s.prefix_disk_loads):
        return "none"
    files = f"{s.prefix_disk_files} file{'' if s.prefix_disk_files == 1 else 's'}"
    return (f"{files} · {format_bytes(s.prefix_disk_bytes)} · "
            f"{s.prefix_disk_saves} saved, {s.prefix_disk_loads} loaded")
