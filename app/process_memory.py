"""A process's resident memory (RSS): psutil if installed, else Linux's /proc; None if neither
can tell (the server's /metrics and the soak, bench/soak.py)."""

from __future__ import annotations

import os


def resident_bytes(pid: int | None = None) -> int | None:
    """Resident set size of `pid` (default: this process) in bytes, or None if unknown."""
    pid = os.getpid() if pid is None else pid
    try:
        import psutil  # optional: macOS and Windows

        return int(psutil.Process(pid).memory_info().rss)
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - gone, or not ours to read: unknown, not an error
        return None
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


# Beside the budgeted KV: each tick's activations and logits, copies made while a cache
# grows or a batch is merged (old and new alive at once), glibc's freed memory it keeps for
# reuse (engine/cpu_memory.py), the tokenizer's and the event loop's. docs/memory.md.
OVERHEAD_BYTES = 512 << 20


def memory_bound(resident_at_start: int, kv_budget_bytes: int) -> int:
    """What the process may hold under any load: its memory once the model was ready (the
    weights and the runtime), plus the KV budget, plus OVERHEAD_BYTES."""
    return resident_at_start + kv_budget_bytes + OVERHEAD_BYTES
