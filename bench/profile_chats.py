"""Where the ticks of the many-chats scenario go (8 chats x 4 turns, think time), engine
only: each tick's rows, prefill tokens and time, split into admission, prefill, joining the
batch, decode (or the ragged pass that does both) and leaving it; the gaps between tokens;
and the TTFT of each turn. For finding what a next turn waits for, not a benchmark with
peers.

    python -m bench.profile_chats [--chats 8 --turns 4 --think-s 1]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import defaultdict
from typing import Any

from engine.preload import ensure_preloads


def _timed(obj: Any, name: str, phases: dict[str, float], key: str | None = None) -> None:
    real = getattr(obj, name)
    key = key or name

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            phases[key] += time.perf_counter() - t

    setattr(obj, name, wrapper)


async def main(args: argparse.Namespace) -> None:
    from engine import tick_passes
    from engine.config import EngineConfig
    from engine.engine import Engine
    from engine.loader import load_model

    from .chat_clients import EngineChat
    from .multiturn import many_chats

    loaded = load_model(args.model)
    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                    context_length=loaded.context_length,
                    config=EngineConfig(max_concurrent=args.chats + 1, max_queue=4096,
                                        whole_prompt_tokens=args.whole))
    core = engine._core
    phases: dict[str, float] = defaultdict(float)
    ticks: list[dict[str, float]] = []
    # the passes ModelRunner.execute chose (engine/tick_passes.py's functions, looked up by
    # module at each call); the prefill passes are timed by the model's calls
    for obj, name, key in ((core, "_schedule", None), (core.runner, "prefill", "_prefill"),
                           (core.runner, "prefill_many", "_prefill"),
                           (core.batch, "join", None), (tick_passes, "run_decode", None),
                           (tick_passes, "run_shared", None),
                           (core, "_drop_finished_rows", None)):
        if hasattr(obj, name):
            _timed(obj, name, phases, key)
    step = core.step

    def profiled_step(*args: Any, **kwargs: Any) -> Any:
        phases.clear()
        events = step(*args, **kwargs)
        if core.stats.num_ticks and (not ticks or ticks[-1]["index"] != core.stats.num_ticks):
            rec = core.stats.ticks[-1]
            ticks.append({"index": core.stats.num_ticks, "rows": rec.decode_rows,
                          "prefill": rec.prefill_tokens, "seqs": rec.prefill_seqs,
                          "step": rec.step_s, **phases})
        return events

    core.step = profiled_step
    gaps: list[float] = []
    record_tick = core.stats.record_tick

    def record(rec: Any, tick_gaps: list[float]) -> None:
        gaps.extend(tick_gaps)
        record_tick(rec, tick_gaps)

    core.stats.record_tick = record
    await engine.start()
    try:
        # Warm-up: one short chat, so the first measured tick is not MLX's first.
        await many_chats(EngineChat(engine), 1, 1, 8, 0.0)
        ticks.clear()
        gaps.clear()
        out = await many_chats(EngineChat(engine), args.chats, args.turns, args.tokens,
                               args.think_s)
    finally:
        await engine.shutdown()
    print(f"output {out['output_tps']:.1f} tok/s, last-turn TTFT median "
          f"{out['last_turn_ttft_median']:.3f} s, by turn "
          + ", ".join(f"{t * 1000:.0f}" for t in out["ttft_median_by_turn"]) + " ms")
    g = sorted(gaps)
    if g:
        print(f"gaps between tokens: n {len(g)}, median {g[len(g) // 2] * 1e3:.0f} ms, p99 "
              f"{g[int(0.99 * (len(g) - 1))] * 1e3:.0f} ms, max {g[-1] * 1e3:.0f} ms; over 50 / 80 "
              f"/ 120 ms: {sum(x > 0.05 for x in g)} / {sum(x > 0.08 for x in g)} / "
              f"{sum(x > 0.12 for x in g)}")
    kinds: dict[str, list[dict[str, float]]] = defaultdict(list)
    for t in ticks:
        kinds["with prefill" if t["prefill"] else "decode only"].append(t)
    cols = ["step", "_schedule", "_prefill", "join", "run_decode", "run_shared",
            "_drop_finished_rows"]
    print(f"{'ticks':>14} {'n':>4} {'rows':>5} {'pf tok':>6} "
          + " ".join(f"{c.strip('_')[:12]:>12}" for c in cols) + "   (medians, ms)")
    for kind, rows in kinds.items():
        med = {c: statistics.median(r.get(c, 0.0) for r in rows) * 1000 for c in cols}
        print(f"{kind:>14} {len(rows):>4} {statistics.median(r['rows'] for r in rows):>5.0f} "
              f"{statistics.median(r['prefill'] for r in rows):>6.0f} "
              + " ".join(f"{med[c]:>12.1f}" for c in cols))
    if args.ticks:
        for t in ticks:
            print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in t.items()))
    firsts = sorted((r["turn"], r["ttft_s"]) for r in out["turns"])
    print("TTFT by turn (s):", {t: [round(x, 2) for tt, x in firsts if tt == t]
                                for t in range(args.turns)})


if __name__ == "__main__":
    ensure_preloads()
    from engine.config import EngineConfig

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="bundled")
    p.add_argument("--chats", type=int, default=8)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--think-s", type=float, default=1.0)
    p.add_argument("--whole", type=int, default=EngineConfig().whole_prompt_tokens,
                   help="EngineConfig.whole_prompt_tokens (0: short prompts stay within "
                        "the allowance)")
    p.add_argument("--ticks", action="store_true", help="print every tick")
    asyncio.run(main(p.parse_args()))
