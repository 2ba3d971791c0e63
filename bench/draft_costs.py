"""What checking drafted positions costs a decode step (issue #31): one pass, by shape.

    python -m bench.draft_costs [--model bundled] [--rows 8] [--repeats 3]

On the engine in this process: `--rows` chats decode (the bundled model, their KV a few
dozen tokens long), then each way below is timed on the same rows, its KV taken back after
each pass, alternated, median ms over `--repeats` rounds of 15 passes each:

- plain: the batch's decode step as the engine runs it (the compiled step on a CPU);
- ragged: the same rows as one ragged pass (the CPU's native kernels only), no drafts,
  then with drafts as segments beside the rows (one row x 2, one x 8, two x 4, every row
  x 2, every row x 4): `EngineCore._run_shared`;
- padded: the rows in a pass of their own, each padded to the most drafts
  (`DecodeBatch.verify_rows`: where there is no ragged pass, a GPU's batch);
- with `--rows 1`: the lone row's input and k drafts (`DecodeBatch.verify_alone`).

What a position costs next to what a row's token is worth (a plain step / rows) is what
`engine/speculation.py` decides from; these figures say why a batch on a CPU drafts less
than one stream does.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from engine.preload import ensure_preloads


def _time(fn: Callable[[], None], n: int = 15) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.draft_costs", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="bundled")
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    ensure_preloads()
    import mlx.core as mx

    from bench.scenarios import prompt_texts
    from engine import Engine, EngineConfig, SamplingParams

    engine = Engine.load(args.model, EngineConfig(speculative="off"))
    core = engine._core
    for text in prompt_texts(args.rows):
        engine.submit([{"role": "user", "content": text}],
                      params=SamplingParams(max_tokens=1000))
    for _ in range(40):
        engine.step()
    batch, runner = core.batch, core.runner
    batch.roll_back_ahead()
    seqs = batch.seqs
    if len(seqs) != args.rows:
        print(f"expected {args.rows} decoding rows, have {len(seqs)}", file=sys.stderr)
        return 1
    rows = len(seqs)

    def drafts_of(counts: list[int]) -> list[list[int]]:
        return [[s.next_input] * k for s, k in zip(seqs, counts, strict=True)]

    def plain() -> None:
        cache, tokens = batch.step_inputs()
        mx.eval(runner.decode(cache, tokens))
        if batch.is_batched:
            for layer in cache:
                layer.unwrite()
        else:
            for layer in cache:
                layer.trim(1)

    def ragged(counts: list[int]) -> Callable[[], None]:
        def run() -> None:
            cache, tokens = batch.step_inputs()
            runner.ragged(cache, tokens, [], [], drafts_of(counts) if any(counts) else None)
            for row, k in enumerate(counts):
                batch.take_back(row, 1 + k)
        return run

    def padded(counts: list[int]) -> Callable[[], None]:
        def run() -> None:
            mx.eval(batch.verify_rows(drafts_of(counts)))
            for row, k in enumerate(counts):
                batch.take_back(row, 1 + k)
        return run

    def alone(k: int) -> Callable[[], None]:
        def run() -> None:
            mx.eval(batch.verify_alone([seqs[0].next_input] * k))
            batch.take_back(0, 1 + k)
        return run

    ways: dict[str, Callable[[], None]] = {"plain step": plain}
    if rows == 1:
        for k in (0, 1, 2, 4, 8, 16):
            ways[f"alone, {k} drafts"] = alone(k)
    else:
        shapes = {"no drafts": [0] * rows, "1 row x 2": [2] + [0] * (rows - 1),
                  "1 row x 8": [8] + [0] * (rows - 1), "2 rows x 4": [4, 4] + [0] * (rows - 2),
                  "every row x 2": [2] * rows, "every row x 4": [4] * rows}
        if runner.shares_passes and batch.can_share_pass():
            for name, counts in shapes.items():
                ways[f"ragged, {name}"] = ragged(counts)
        for name, counts in shapes.items():
            if any(counts):
                ways[f"padded, {name}"] = padded(counts)
    for fn in ways.values():  # first uses compile kernels for their shapes
        fn()
    results: dict[str, list[float]] = {name: [] for name in ways}
    for r in range(args.repeats):
        order = list(ways) if r % 2 == 0 else list(reversed(ways))
        for name in order:
            results[name].append(_time(ways[name]))
    base = statistics.median(results["plain step"])
    print(f"{args.model}, {rows} row(s), {mx.default_device()}: median ms a pass "
          f"(a row's token is worth {base / rows:.1f} ms)")
    for name, times in results.items():
        ms = statistics.median(times)
        print(f"  {name:26s} {ms:7.1f} ms  (+{ms - base:5.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
