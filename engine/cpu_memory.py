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

Where mimalloc serves malloc instead (engine/allocator.py, preloaded on Linux's CPU backend by
default), none of this applies: it reuses freed memory for a moment and gives it back by
itself; `give_back_freed_memory` then asks it to return what it holds at once.

Bounded: what glibc keeps is given back when the engine goes idle (`give_back_freed_memory`)
and, while it stays busy, whenever its arenas hold more than SPARE_CAP freed
(`bound_freed_memory`, between ticks): buffers that grow with the contexts leave holes in
the arenas' heaps that no trim threshold returns, and a long busy session's RSS grew by
them without end.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import allocator

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc refuses more than HEAP_MAX_SIZE / 2 = 32 MiB on 64-bit
TRIM_THRESHOLD = 256 << 20  # at most this much freed memory is kept above live data

# While the engine is busy, the freed memory glibc holds in all its arenas (holes in the
# middle of their heaps, which no trim threshold returns) may be this much before it is
# given back; checked at most every SPARE_CHECK_S. Without it, 8 chats whose contexts grow
# left 1.1 GiB freed but held beside 0.5 GiB in use after 9 rounds (docs/memory.md).
SPARE_CAP = 256 << 20
SPARE_CHECK_S = 1.0

_tuned: bool | None = None
_checked_at = 0.0
# The lowest RSS less glibc's bytes in use the bound saw since memory was given back: the
# process's memory outside malloc's live blocks (code, Qt, stacks, mapped files) plus the
# freed memory still resident then. What rises above it is freed memory kept resident.
_outside: int | None = None


@dataclass
class GivenBack:
    """How often freed memory was given back in this process, and the time it took (the
    engine thread's pause: docs/memory.md)."""

    count: int = 0
    seconds: float = 0.0


given_back = GivenBack()


def keep_freed_memory() -> bool:
    """Tune glibc's malloc once per process; True if it is (now or already) tuned."""
    global _tuned
    if _tuned is None:
        _tuned = _tune()
    return _tuned


def give_back_freed_memory() -> bool:
    """Return the freed memory glibc keeps (every arena, up to TRIM_THRESHOLD each) to the
    system: for when the engine goes idle, so an idle app's RSS is its live data. True if
    anything was returned. Only where keep_freed_memory tuned malloc, or where mimalloc
    serves it (then its `mi_collect`)."""
    if allocator.is_mimalloc_loaded():
        return _timed(allocator.give_back_freed_memory)
    libc = _libc()
    if not _tuned or libc is None:
        return False
    global _outside
    libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    gave = _timed(lambda: bool(libc.malloc_trim(0)))
    _outside = None  # the bound's next look starts from what is resident now
    return gave


def _timed(give_back: Callable[[], bool]) -> bool:
    """One give-back, counted and timed (`given_back`, the metrics' figures)."""
    t = time.perf_counter()
    try:
        return give_back()
    finally:
        given_back.count += 1
        given_back.seconds += time.perf_counter() - t


def held_freed_bytes() -> int | None:
    """The freed memory glibc's arenas hold (mallinfo2's fordblks, every arena summed), or
    None where it cannot tell (not glibc, or older than 2.33)."""
    heap = heap_bytes()
    return None if heap is None else heap[1]


def heap_bytes() -> tuple[int, int] | None:
    """(in use, freed but held) by glibc's malloc: blocks in use in its arenas plus those
    mmapped on their own (mallinfo2's uordblks + hblkhd), and the arenas' freed bytes
    (fordblks); None where it cannot tell, or where mimalloc serves malloc (glibc's figures
    would be its own few bytes)."""
    if allocator.is_mimalloc_loaded():
        return None
    libc = _libc()
    fn = getattr(libc, "mallinfo2", None) if libc is not None else None
    if fn is None:
        return None
    fn.restype = _MallInfo2
    info = fn()
    return int(info.uordblks) + int(info.hblkhd), int(info.fordblks)


def bound_freed_memory(now: float | None = None) -> bool:
    """Between two ticks of a busy engine: give back glibc's freed memory once more than
    SPARE_CAP of it is resident. Resident freed memory is RSS less malloc's bytes in use,
    over its lowest since memory was last given back (freed memory already given back stays
    counted as held by mallinfo2, but is no longer resident; RSS alone misses holes left
    where live data shrank, e.g. KV evicted while RSS stays put). Looked at most every
    SPARE_CHECK_S; True if it was given back. Only where keep_freed_memory tuned malloc: it
    is that tuning's kept memory that grows."""
    global _checked_at, _outside
    if not _tuned:
        return False
    now = time.monotonic() if now is None else now
    if now - _checked_at < SPARE_CHECK_S:
        return False
    _checked_at = now
    rss, heap = _resident_bytes(), heap_bytes()
    if rss is None or heap is None:
        return False
    in_use, held = heap
    outside = rss - in_use
    _outside = outside if _outside is None else min(_outside, outside)
    return outside - _outside > SPARE_CAP and held > SPARE_CAP and give_back_freed_memory()


def _resident_bytes() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def _tune() -> bool:
    if not sys.platform.startswith("linux") or allocator.is_mimalloc_loaded():
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
