"""A long session in the real window, measured: 8 tabs send a turn each, round after round,
on the bundled model; after each round the process's RSS, MLX's live arrays and their peak
in the round, the KV in use and the prefix cache; then 3 s idle. Runnable by hand (numbers
in docs/memory.md, issue #46):

    QT_QPA_PLATFORM=offscreen python -m tools.measure.memory_session --rounds 8 --max-tokens 200
"""

from __future__ import annotations

import asyncio
import os
import tempfile

from tests.ui.lag_run import PROMPTS
from tools.app_start import arguments, load, open_window, qt_app, run

MIB = 1 << 20


def main() -> None:
    p = arguments(out=False)
    p.add_argument("--tabs", type=int, default=8)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=200)
    args = p.parse_args()
    os.environ.setdefault("BATCHCHAT_DATA_DIR", tempfile.mkdtemp())  # a history of its own

    import mlx.core as mx

    from app.context import AppContext
    from app.process_memory import resident_bytes

    _app, loop = qt_app("memory_session")
    window = open_window(AppContext.create())

    def report(label: str) -> None:
        local = window.ctx.bridge.local
        s = local.engine.stats()
        print(f"{label}: RSS {(resident_bytes() or 0) // MIB} MiB (bound "
              f"{(local.memory_bound() or 0) // MIB}), MLX live {mx.get_active_memory() // MIB}"
              f" MiB, peak in the round {mx.get_peak_memory() // MIB} MiB, KV "
              f"{s.kv_used_bytes // MIB} of {s.kv_budget_bytes // MIB} MiB "
              f"({s.prefix_entries} cached prefixes)", flush=True)

    async def session() -> None:
        await load(window.ctx.bridge, args.model)
        tabs = [window.current_tab()] + [window.new_tab() for _ in range(args.tabs - 1)]
        for i, tab in enumerate(tabs):
            tab.panel.fields["max_tokens"].setValue(args.max_tokens)
            tab.panel.fields["seed"].setValue(i)
        await asyncio.sleep(3)
        report("ready")
        for r in range(args.rounds):
            mx.reset_peak_memory()
            for i, tab in enumerate(tabs):
                tab.send_text(f"{PROMPTS[(i + r) % len(PROMPTS)]} (turn {r + 1})")
                await asyncio.sleep(0)
            while any(t.conversation.is_busy for t in tabs):
                await asyncio.sleep(0.1)
            report(f"round {r + 1}")
        mx.reset_peak_memory()
        await asyncio.sleep(3)
        report("idle 3 s")
        await window.ctx.bridge.shutdown(3.0)

    run(loop, session())


if __name__ == "__main__":
    main()
