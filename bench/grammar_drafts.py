"""`python -m bench.grammar_drafts`: what a grammar's forced tokens as drafts gain.

    python -m bench.grammar_drafts [--model bundled] [--max-tokens 64] [--repeats 3]
                                   [--sampling greedy|tabs]

bench/constrained.py's requests (a JSON schema of a long array of records, no end token:
every row runs to max_tokens) on one engine in this process, step mode, with grammar drafts
on (EngineConfig.grammar_drafts, engine/grammar_planner.py) and off, alternated A B B A in
each trial: one constrained stream, 8 constrained rows, and 16 rows of which 8 constrained
(the free rows run as many ticks either way). Decode tok/s as bench/constrained.py counts
it, the process's CPU time a token (all its threads: a figure other processes' load moves
less than the wall clock's), the ticks the run took, and the forced tokens checked and
taken. The tokens are the same either way (tests/engine/test_grammar_drafts.py); this says
what they cost.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from bench.request_sampling import SAMPLING
from engine.preload import ensure_preloads

WAYS = {"1 stream, constrained": (1, 1), "8 rows, all constrained": (8, 8),
        "16 rows, 8 constrained": (16, 8)}


def main(args: argparse.Namespace) -> None:
    from engine import Engine, EngineConfig
    from engine.loader import load_model

    from .constrained import run

    loaded = load_model(args.model)
    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=[],
                    context_length=loaded.context_length,
                    config=EngineConfig(max_concurrent=16), description=loaded.description)
    core = engine._core  # (a bench may not import engine.testing)
    planner = core.scheduler.planners[0]  # the grammar planner (engine/engine_core.py)
    most = planner.max_drafts

    def one(way: str, drafts: bool, max_tokens: int) -> tuple[float, float, int, int, int]:
        planner.max_drafts = most if drafts else 0
        ticks, checked, taken = core.stats.num_ticks, planner.drafted, planner.accepted
        cpu = time.process_time()
        rate, made = run(engine, *WAYS[way], max_tokens, args.sampling)
        cpu_ms = 1000 * (time.process_time() - cpu) / made
        return (rate, cpu_ms, core.stats.num_ticks - ticks, planner.drafted - checked,
                planner.accepted - taken)

    for way in WAYS:  # warm-up: each shape's first passes, with and without drafts
        one(way, True, 8)
        one(way, False, 8)
    got: dict[tuple[str, bool], list[float]] = {}
    cpu: dict[tuple[str, bool], list[float]] = {}
    for trial in range(1, args.repeats + 1):
        for way in WAYS:
            for drafts in (True, False, False, True) if trial % 2 else (False, True, True, False):
                rate, cpu_ms, ticks, checked, taken = one(way, drafts, args.max_tokens)
                got.setdefault((way, drafts), []).append(rate)
                cpu.setdefault((way, drafts), []).append(cpu_ms)
                print(f"trial {trial} {way:24s} drafts {'on ' if drafts else 'off'} "
                      f"{rate:7.1f} tok/s, CPU {cpu_ms:6.2f} ms a token, {ticks} ticks, "
                      f"forced tokens checked {checked}, taken {taken}", flush=True)
    print(f"\n{loaded.description}, max_tokens {args.max_tokens}, sampling {args.sampling}, "
          f"medians of {2 * args.repeats}:")
    for way in WAYS:
        on, off = (statistics.median(got[(way, d)]) for d in (True, False))
        con, coff = (statistics.median(cpu[(way, d)]) for d in (True, False))
        print(f"  {way:24s}: on {on:7.1f} tok/s, off {off:7.1f} tok/s, on / off "
              f"{on / off:.2f}; CPU a token on {con:.2f} ms, off {coff:.2f} ms, "
              f"on / off {con / coff:.2f}")


if __name__ == "__main__":
    ensure_preloads()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="bundled")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sampling", choices=sorted(SAMPLING), default="greedy")
    main(p.parse_args())
    sys.exit(0)
