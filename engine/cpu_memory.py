"""Keep freed memory inside the process on glibc, so MLX's CPU buffers stop page-faulting.

Why: MLX's CPU backend takes every buffer straight from `malloc`. glibc serves large
requests with a fresh `mmap`, and on `free` it unmaps them or trims the top of the heap back
to the OS. So each intermediate of a prefill pass (a few MB: activations, SiLU, attention
scores) comes back as new zero pages that fault on first touch, about 6,000 faults and
0.3 ms of kernel time per 8 MB buffer. Measured on the 2-core dev machine: our `exp` over
2M floats 10.5 -> 3.1 ns an element; a prefill pass of 14 x 145 tokens 6.2 -> 4.0 s when
built on the main thread, 4.4 -> 4.2 s on a worker thread like the engine's (glibc's
per-thread arenas already keep more).

How: `mallopt` raises the mmap threshold to glibc's maximum (32 MiB) and the trim
threshold to 256 MiB, so freed blocks are reused. This is process-wide and applies to
everything in it, mlx-lm's own generators included. The engine calls it on the CPU backend
only (Metal and CUDA keep their own buffer caches); without glibc (macOS, musl) it does
nothing. `CpuOptions.malloc_tuning = False` (BATCHCHAT_NO_MALLOC_TUNING=1) opts out: the
model runner then does not call it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc refuses more than HEAP_MAX_SIZE / 2 = 32 MiB on 64-bit
TRIM_THRESHOLD = 256 << 20  # at most this much freed memory is kept above live data

_tuned: bool | None = None


def keep_freed_memory() -> bool:
    """Tune glibc's malloc once per process; True if it is (now or already) tuned."""
    global _tuned
    if _tuned is None:
        _tuned = _tune()
    return _tuned


def give_back_freed_memory() -> bool:
    """Return the freed memory glibc keeps (every arena, up to TRIM_THRESHOLD each) to the
    system: for when the engine goes idle, so an idle app's RSS is its live data. True if
    anything was returned. Only where keep_freed_memory tuned malloc."""
    if not _tuned:
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    return bool(libc.malloc_trim(0))


def _tune() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
