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
`--phases` also takes that tick apart by phase: for schedule, the runner's passes, the rows'
step, the finished rows' leave and the join, MLX's arrays live as it began, its peak and
what was live after it (nothing is evaluated early, so a lazy copy counts where it runs),
the cached prefixes' and batch buffers' bytes before and after it, and what the batch's
buffers held as the tick began (rows made against rows in use, columns against lengths).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

MIB = 1 << 20
BUNDLED = Path.home() / ".cache" / "batchchat" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _held(core) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(cached prefixes' bytes, the decode batch's buffers' bytes) now."""
    if core is None:
        return 0, 0
    prefix = core.memory.prefix
    return (prefix.nbytes if prefix is not None else 0), core.batch.nbytes


def _buffers(core) -> str:  # type: ignore[no-untyped-def]
    """The decode batch's buffers in words: bytes, rows held of rows made, columns made
    against the rows' lengths, and what the rows still running have set aside."""
    cache = core.batch.cache
    if cache is None:
        return "no batch buffers"
    layer = cache[0]
    lengths = getattr(layer, "lengths", None)
    keys = getattr(layer, "keys", None)
    if lengths is None or keys is None or keys.ndim != 4:
        return f"batch buffers {core.batch.nbytes // MIB} MiB"
    running = sum(s.kv_reserved for s in core.batch.seqs if not s.is_finished)
    done = sum(s.is_finished for s in core.batch.seqs)
    return (f"batch buffers {core.batch.nbytes // MIB} MiB: {len(lengths)} of {keys.shape[0]}"
            f" rows ({done} finished), {keys.shape[2]} columns for lengths "
            f"{min(lengths, default=0)}-{max(lengths, default=0)}, running rows' set-asides "
            f"{running // MIB} MiB")


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
    # this tick's: live before, peak, after; (prefixes, batch buffers) before and after
    phases: dict[str, tuple[int, int, int, tuple[int, int], tuple[int, int]]] = {}
    cores: list = []  # the engine's core (the runner's phases find it here)

    def core_of(obj):  # type: ignore[no-untyped-def]
        return obj if hasattr(obj, "memory") else (cores[0] if cores else None)
    worst: list[tuple[int, dict, str]] = []  # the round's tick with the highest phase peak
    if args.phases:
        from engine import engine_core, model_runner

        def timed(cls: type, name: str) -> None:
            fn = getattr(cls, name)

            def probed(self, *a, **k):  # type: ignore[no-untyped-def]
                live = mx.get_active_memory()
                held = _held(core_of(self))
                mx.reset_peak_memory()
                try:
                    return fn(self, *a, **k)
                finally:
                    # (the peak since the reset: 0 when the phase made nothing)
                    phases[name.strip("_")] = (live, max(live, mx.get_peak_memory()),
                                               mx.get_active_memory(), held,
                                               _held(core_of(self)))
                    mx.reset_peak_memory()
            setattr(cls, name, probed)

        for cls, name in ((engine_core.EngineCore, "_schedule"),
                          (model_runner.ModelRunner, "execute"),
                          (model_runner.ModelRunner, "step_rows"),
                          (engine_core.EngineCore, "_drop_finished_rows"),
                          (engine_core.EngineCore, "_join_prefilled")):
            timed(cls, name)
        step = engine_core.EngineCore.step

        def stepped(core, *a, **k):  # type: ignore[no-untyped-def]
            cores[:] = [core]
            phases.clear()
            before = _buffers(core)  # the batch buffers as the tick began
            out = step(core, *a, **k)
            top = max((v[1] for v in phases.values()), default=0)
            if not worst or top > worst[0][0]:
                worst[:] = [(top, dict(phases), f"{before}; {len(core.batch.seqs)} rows after, "
                             f"{len(core.scheduler.prefilling)} prefilling, KV set aside "
                             f"{core.memory.reserved // MIB} MiB, prefixes "
                             f"{core.memory.prefix.nbytes // MIB if core.memory.prefix else 0}")]
            return out

        engine_core.EngineCore.step = stepped
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
        if worst:
            peak, by_phase, rows = worst[0]
            print(f"  tick of the highest phase peak: {peak // MIB} MiB ({rows}): " + "; ".join(
                f"{name} {a // MIB} -> peak {b // MIB} -> {c // MIB} (prefixes, buffers "
                f"{h0[0] // MIB}, {h0[1] // MIB} -> {h1[0] // MIB}, {h1[1] // MIB})"
                for name, (a, b, c, h0, h1) in by_phase.items()), flush=True)
            worst.clear()

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
