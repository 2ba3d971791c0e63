"""A long session in the real window, measured: 8 tabs send a turn each, round after round,
on the bundled model; after each round the process's RSS and its highest in the round
(sampled every 0.25 s), MLX's live arrays, buffer cache and peak in the round, the KV in use,
the prefix cache against its cap, glibc's heap (in use, freed but held); then 3 s idle.
Runnable by hand (numbers in docs/memory.md, issue #46):

    QT_QPA_PLATFORM=offscreen python -m tools.measure.memory_session --rounds 8 --max-tokens 200

`--phases`: also the tick of each round's highest MLX peak, taken apart by phase
(tools/measure/tick_phases.py).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time

from tests.ui.lag_run import PROMPTS
from tools.app_start import arguments, load, open_window, qt_app, run

from .tick_phases import TickPhases

MIB = 1 << 20


def main() -> None:
    p = arguments(out=False)
    p.add_argument("--tabs", type=int, default=8)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=200)
    p.add_argument("--phases", action="store_true",
                   help="also the tick of each round's highest MLX peak, by phase (its own "
                        "peak resets make the round's MLX peak read since the last phase)")
    args = p.parse_args()
    os.environ.setdefault("BATCHCHAT_DATA_DIR", tempfile.mkdtemp())  # a history of its own

    import mlx.core as mx

    from app.context import AppContext
    from app.process_memory import resident_bytes
    from engine import cpu_memory
    from engine.public import heap_bytes

    phases = TickPhases()
    if args.phases:
        phases.install()
    _app, loop = qt_app("memory_session")
    window = open_window(AppContext.create())

    highest = [0]  # RSS, the most this round

    async def sample_rss() -> None:
        while True:
            highest[0] = max(highest[0], resident_bytes() or 0)
            await asyncio.sleep(0.25)

    def report(label: str) -> None:
        local = window.ctx.bridge.local
        s = local.engine.stats()
        used, held = heap_bytes() or (0, 0)
        print(f"{label}: RSS {(resident_bytes() or 0) // MIB} MiB, at most {highest[0] // MIB}"
              f" (bound {(local.memory_bound() or 0) // MIB}), MLX live "
              f"{mx.get_active_memory() // MIB} cache {mx.get_cache_memory() // MIB} MiB, peak "
              f"in the round {mx.get_peak_memory() // MIB} MiB, KV {s.kv_used_bytes // MIB} of "
              f"{s.kv_budget_bytes // MIB} MiB (cached prefixes {s.prefix_cached_bytes // MIB} "
              f"of {s.kv_prefix_budget_bytes // MIB} MiB, {s.prefix_entries} entries), glibc in "
              f"use {used // MIB} freed held {held // MIB} MiB, given back "
              f"{cpu_memory.given_back.count}x ({cpu_memory.given_back.seconds * 1000:.0f} ms)",
              flush=True)
        highest[0] = 0
        phases.report()

    async def session() -> None:
        await load(window.ctx.bridge, args.model)
        tabs = [window.current_tab()] + [window.new_tab() for _ in range(args.tabs - 1)]
        for i, tab in enumerate(tabs):
            tab.panel.fields["max_tokens"].setValue(args.max_tokens)
            tab.panel.fields["seed"].setValue(i)
        await asyncio.sleep(3)
        sampler = asyncio.ensure_future(sample_rss())
        report("ready")
        t0 = time.monotonic()
        for r in range(args.rounds):
            mx.reset_peak_memory()
            for i, tab in enumerate(tabs):
                tab.send_text(f"{PROMPTS[(i + r) % len(PROMPTS)]} (turn {r + 1})")
                await asyncio.sleep(0)
            while any(t.conversation.is_busy for t in tabs):
                await asyncio.sleep(0.1)
            report(f"round {r + 1} ({time.monotonic() - t0:.0f} s, {time.process_time():.0f} "
                   "CPU-s)")
        mx.reset_peak_memory()
        await asyncio.sleep(3)
        report("idle 3 s")
        sampler.cancel()
        await window.ctx.bridge.shutdown(3.0)

    run(loop, session())


if __name__ == "__main__":
    main()
