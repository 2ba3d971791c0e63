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
