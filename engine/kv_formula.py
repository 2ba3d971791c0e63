"""The KV budget's arithmetic, without MLX: the engine's default budget (kv_memory.py) and
the model library's estimate before a model loads (loader/support.py) use the same one."""

from __future__ import annotations

import os

MIN_DEFAULT_BUDGET = 256 << 20  # below this a model's longer prompts could not run at all
# A running slot's share: a short chat turn (prompt + reply + mlx-lm's 256-token allocation
# step). A request's set-aside assumes it runs to max_tokens, so most use far less; longer
# ones use the spare, or wait for room (they are refused only above the whole budget).
SLOT_TOKENS = 512
SPARE_TOKENS = 8192  # one long request (or cached prefixes while none runs)
MEMORY_SHARE = 4  # at most 1/4 of the memory available once the weights are loaded


KV_STEP = 256  # mlx-lm's KVCache.step: a cache grows this many positions at a time


def wanted_tokens(context_length: int, max_concurrent: int) -> int:
    """Tokens of KV the default asks for: a short chat turn a slot, plus one long request."""
    return (max_concurrent * min(context_length, SLOT_TOKENS)
            + min(context_length, SPARE_TOKENS))


def formula(per_token: int, context_length: int, max_concurrent: int,
            available: int) -> tuple[int, int]:
    """The default budget and cached prefixes' part of it, from the model's KV bytes a token
    and context length, the engine's concurrency and the memory available to the KV (the
    formula of engine/kv_memory.py's docstring)."""
    tokens = wanted_tokens(context_length, max_concurrent)
    one_sequence = context_length + KV_STEP  # what a request to the context's end sets aside
    budget = max(MIN_DEFAULT_BUDGET, min(available // MEMORY_SHARE,
                                         per_token * max(tokens, one_sequence)))
    return budget, min(budget, max(MIN_DEFAULT_BUDGET, per_token * tokens))


def host_available_bytes() -> int:
    """RAM the system could give this process now without swapping: psutil if installed, else
    Linux's MemAvailable, else free pages (os.sysconf), else physical RAM."""
    try:
        import psutil  # optional: the most portable answer (macOS, Windows)

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    page = os.sysconf("SC_PAGE_SIZE")
    for name in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
        try:
            pages = os.sysconf(name)
        except (ValueError, OSError):
            continue
        if pages > 0:
            return page * pages
    return MIN_DEFAULT_BUDGET * MEMORY_SHARE
