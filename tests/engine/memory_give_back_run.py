"""Run by test_idle_memory.py in a fresh process: 192 MiB freed below glibc's tuned trim
threshold stays resident until cpu_memory.give_back_freed_memory(). Prints the three
RSS rises over the start, in MiB."""

from __future__ import annotations

import json

import numpy as np

from app.process_memory import resident_bytes
from engine import cpu_memory

if __name__ == "__main__":
    tuned = cpu_memory.keep_freed_memory()
    base = resident_bytes() or 0
    blocks = [np.ones(16 << 20, dtype=np.uint8) for _ in range(12)]  # heap, not mmap
    held = resident_bytes() or 0
    del blocks
    freed = resident_bytes() or 0
    gave = cpu_memory.give_back_freed_memory()
    after = resident_bytes() or 0
    print(json.dumps({"tuned": tuned, "gave": gave,
                      "rise_mib": [(x - base) >> 20 for x in (held, freed, after)]}))
