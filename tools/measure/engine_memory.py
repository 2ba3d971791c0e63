"""Where a busy engine's memory goes, round after round (issue #46 item 14): 8 chats on the
bundled model in one engine, a turn each per round (their contexts grow); after each round
the process's RSS, MLX's live arrays, buffer cache and peak in the round, glibc's bytes in
use and freed but held (mallinfo2), and how often and how long engine/cpu_memory.py gave
freed memory back while busy. Runnable by hand (figures in docs/memory.md):

    python -m tools.measure.engine_memory --rounds 9 --max-tokens 200
    python -m tools.measure.engine_memory --rounds 9 --max-tokens 200 --no-bound

`--ticks` also says, for each round, the tick in which MLX's arrays peaked: that peak, the
arrays live after it, the tick's decode rows and prefill tokens, the KV the budget has set
aside for running requests, the cached prefixes' bytes and the decode batch's buffers
(engine_core's own figures, read on the engine thread as the tick is recorded).
`--phases` also takes the round's tick of the highest phase peak apart by phase
(tools/measure/tick_phases.py).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from .tick_phases import TickPhases

MIB = 1 << 20
BUNDLED = Path.home() / ".cache" / "batchchat" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


async def session(args: argparse.Namespace) -> None:
    import mlx.core as mx

    from app.process_memory import resident_bytes
    from bench.scenarios import make_engine
    from engine import SamplingParams, cpu_memory
    from engine.loader import load_model

    trims = [0, 0.0]
    give_back = cpu_memory.give_back_freed_memory

    def counted() -> bool:  # the module's own function, timed
        t = time.perf_counter()
        try:
            return give_back()
        finally:
            trims[0] += 1
            trims[1] += time.perf_counter() - t

    cpu_memory.give_back_freed_memory = counted
    top: list[dict] = []  # the round's tick with the highest MLX peak
    if args.ticks:
        from engine import engine_core
        from engine.prefix_cache import cache_bytes

        record = engine_core.EngineCore._record_tick

        def probed(core, plan, run, tokens_out):  # type: ignore[no-untyped-def]
            peak = mx.get_peak_memory()
            mx.reset_peak_memory()
            if not top or peak > top[0]["peak"]:
                batch = core.batch.cache
                top[:] = [{"peak": peak, "live": mx.get_active_memory(), "rows": run.rows,
                           "prefill": plan.num_prefill_tokens, "seqs": len(plan.prefill),
                           "reserved": core.memory.reserved,
                           "prefixes": core.memory.prefix.nbytes if core.memory.prefix else 0,
                           "batch": cache_bytes(batch) if batch is not None else 0,
                           "spare": core.batch.spare_nbytes}]
            return record(core, plan, run, tokens_out)

        engine_core.EngineCore._record_tick = probed
    phases = TickPhases()
    if args.phases:
        phases.install()
    if args.no_bound:
        cpu_memory.SPARE_CAP = 1 << 62
    engine = make_engine(load_model(args.model), args.chats + 1)
    await engine.start()
    chats = [[{"role": "user", "content": f"Tell me a long story about topic number {i}, "
               "with many details."}] for i in range(args.chats)]
    t0, c0 = time.monotonic(), time.process_time()

    def report(label: str) -> None:
        used, held = cpu_memory.heap_bytes() or (0, 0)
        print(f"{label}: {time.monotonic() - t0:.0f} s ({time.process_time() - c0:.0f} s of "
              f"CPU), RSS {(resident_bytes() or 0) // MIB}"
              f" MiB, MLX live {mx.get_active_memory() // MIB} cache "
              f"{mx.get_cache_memory() // MIB} peak {mx.get_peak_memory() // MIB} MiB, glibc"
              f" in use {used // MIB} freed held {held // MIB} MiB, given back (busy and idle) "
              f"{trims[0]}x ({trims[1] * 1000:.0f} ms)", flush=True)
        if top:
            t = {k: v // MIB if k not in ("rows", "prefill", "seqs") else v
                 for k, v in top[0].items()}
            print(f"  tick of the highest MLX peak: {t['peak']} MiB (live after it "
                  f"{t['live']}), {t['rows']} decode rows, {t['prefill']} prefill tokens in "
                  f"{t['seqs']}, KV set aside {t['reserved']} MiB, prefixes {t['prefixes']}, "
                  f"batch buffers {t['batch']} (spare {t['spare']})", flush=True)
            top.clear()
        phases.report()

    report("ready")
    for r in range(args.rounds):
        mx.reset_peak_memory()
        streams = [engine.submit(prompt_tokens=engine.prompt_tokens(c, None),
                                 params=SamplingParams(max_tokens=args.max_tokens,
                                                       temperature=0.7, seed=r))
                   for c in chats]
        for c, s in zip(chats, streams, strict=True):
            await s.result()
            c += [{"role": "assistant", "content": s.text},
                  {"role": "user", "content": "Go on, and tell me more."}]
        report(f"round {r + 1}")
    await asyncio.sleep(3)
    report("idle 3 s")
    await engine.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(BUNDLED))
    p.add_argument("--chats", type=int, default=8)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--max-tokens", type=int, default=200)
    p.add_argument("--no-bound", action="store_true",
                   help="never give freed memory back while busy (the state before)")
    p.add_argument("--phases", action="store_true",
                   help="the tick of each round's highest MLX peak, by phase")
    p.add_argument("--ticks", action="store_true",
                   help="the tick of each round's highest MLX peak, taken apart")
    asyncio.run(session(p.parse_args()))


if __name__ == "__main__":
    main()
