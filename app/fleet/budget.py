"""How much memory the loaded models may take together, and what one model will take.

A model's need is the model library's estimate from the file (app/models/inspect.py:
weights as held, the packed copy of the quantized ones, the KV budget), with the KV budget
the engine is set to where one is set. A folder of mlx-lm weights has no such estimate: its
files' size plus the KV budget stands for it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from engine.public import MemoryNeed, host_available_bytes

from ..models.entry import ModelEntry
from ..models.inspect import memory_need

# The default budget: this share of the memory the machine has free when the manager starts
# (the rest for the app, the loading model's transient copies and the system)
MACHINE_SHARE = 0.75
DEFAULT_KV_BYTES = 256 << 20  # engine/kv_formula.py's least default budget


@dataclass(frozen=True)
class HeldOutside:
    """A model loaded beside the manager's that the manager neither loads nor unloads (the
    window's default model, the ModelHost's): its need counts in the budget, so a load is
    refused or evicts with the memory truly taken; it is never evicted by the manager."""

    name: str
    source: str
    need: MemoryNeed
    running: int = 0  # its requests not ended


def default_budget_bytes() -> int:
    """A budget that follows the machine: MACHINE_SHARE of the memory free now."""
    return int(host_available_bytes() * MACHINE_SHARE)


def need_of(entry: ModelEntry, kv_budget_bytes: int | None = None) -> MemoryNeed:
    """What `entry` will take once loaded, from its file (no load)."""
    need = memory_need(entry.path) if entry.path is not None else None
    if need is None:  # an mlx-lm folder, or the bundled model not fetched yet
        need = MemoryNeed(weights=entry.size_bytes or _bundled_size(entry), packed=0,
                          kv_budget=DEFAULT_KV_BYTES)
    if kv_budget_bytes is not None:
        need = dataclasses.replace(need, kv_budget=kv_budget_bytes)
    return need


def _bundled_size(entry: ModelEntry) -> int:
    return 110 << 20 if entry.source == "bundled" else 0  # its Q4_1 file, ~100 MiB
