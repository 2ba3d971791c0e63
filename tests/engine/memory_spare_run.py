"""Run by test_idle_memory.py in a fresh process: holes freed in the middle of glibc's heap
(blocks freed while a later one stays) are kept for reuse up to cpu_memory.SPARE_CAP, and
given back by bound_freed_memory() once they are over it. Prints, for each look, the freed
memory held, the RSS over the start and whether it was given back, in MiB."""

from __future__ import annotations

import json

import numpy as np

from app.process_memory import resident_bytes
from engine import cpu_memory

MIB = 1 << 20


def look(now: float) -> list:
    gave = cpu_memory.bound_freed_memory(now=now)
    return [(cpu_memory.held_freed_bytes() or 0) // MIB,
            ((resident_bytes() or 0) - base) // MIB, gave]


if __name__ == "__main__":
    tuned = cpu_memory.keep_freed_memory()
    base = resident_bytes() or 0
    steps = {"start": look(1e9)}  # the RSS the bound measures a rise from
    blocks = [np.ones(16 * MIB, dtype=np.uint8) for _ in range(24)]  # heap, not mmap
    for i in range(0, 24, 2):  # 12 holes, 192 MiB: under the cap, kept for reuse
        blocks[i] = None
    steps["under"] = look(1e9 + 2)
    for i in (1, 5, 9, 13, 17, 21):  # 96 MiB more, the last block still held: 288 MiB
        blocks[i] = None
    steps["soon"] = look(1e9 + 2.5)  # within SPARE_CHECK_S of the last look: not looked
    steps["over"] = look(1e9 + 4)
    steps["again"] = look(1e9 + 6)  # given back already: not resident, not again
    # Live data that shrinks leaves holes with no rise in RSS (KV evicted, a batch cut):
    # 384 MiB live when memory was last given back, then 288 MiB of it freed, every fourth
    # block kept.
    blocks = [np.ones(16 * MIB, dtype=np.uint8) for _ in range(24)]
    cpu_memory.give_back_freed_memory()
    steps["live"] = look(1e9 + 8)
    for i in range(24):
        if i % 4 != 3:
            blocks[i] = None
    steps["shrunk"] = look(1e9 + 10)
    print(json.dumps({"tuned": tuned, "cap_mib": cpu_memory.SPARE_CAP // MIB,
                      "steps": steps}))
