"""`python -m bench.attention_rows`: a decode step's attention with each row's KV in a
buffer of its own (`native.cache_attention_rows`) against the batch's one buffer
(`native.cache_attention`), issue #47.

The first attempt at one KV layout staged a prompt in the batch's buffer, which grew every
row to the prompt's width; this shows what a row of its own costs the attention kernel
instead. The bundled model's heads (9 query, 3 KV, head size 64), float32 or packed KV:
8 decode rows of 1,000-1,500 keys, (a) in one buffer as wide as they need, (b) in one
buffer grown to a 4,000-token prompt's width, (c) each in a buffer of its own width,
(d) each a column range of one arena (engine/kv_arena.py); and the same 8 rows with a
9th, the prompt's row of 4,000 keys. Median of `--rounds`
timed calls of all 30 layers' attention (one layer's arrays, called 30 times in a graph),
round-robin, in ms of wall time and of process CPU time; then the step's KV write (keys
and values, 30 layers) into one buffer, into rows of their own (an op a row) and into
an arena's ranges (one native.kv_write_columns a layer's keys or values), in ms of process
CPU time:

    python -m bench.attention_rows [--rounds 40] [--kv-bits 8]
"""

from __future__ import annotations

import argparse
import statistics
import time

import mlx.core as mx

from engine import native
from engine.kv_quant import KvPacking
from engine.preload import ensure_preloads
from engine.slot_cache import row_mask

HQ, HKV, DIM, LAYERS = 9, 3, 64, 30


def _rows(lengths: list[int], packing: KvPacking | None) -> list[mx.array]:
    rows = [mx.random.normal((1, HKV, n + 256, DIM)) for n in lengths]
    if packing is not None:
        rows = [packing.pack(r) for r in rows]
    return rows


def _stacked(rows: list[mx.array], width: int) -> mx.array:
    out = mx.zeros((len(rows), HKV, width, rows[0].shape[3]), rows[0].dtype)
    for b, row in enumerate(rows):
        n = min(row.shape[2], width)
        out[b:b + 1, :, :n] = row[:, :, :n]
    return out


def _layers(step) -> tuple[float, float]:
    """Wall and process-CPU ms (the CPU time is steadier on a shared, loaded machine)."""
    start, cpu = time.perf_counter(), time.process_time()
    mx.eval([step() for _ in range(LAYERS)])
    return (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000


def _case(lengths: list[int], wide: int, packing: KvPacking | None, rounds: int) -> dict:
    keys, values = _rows(lengths, packing), _rows(lengths, packing)
    q = mx.random.normal((len(lengths), HQ, 1, DIM))
    narrow = max(lengths) + 1
    mask = row_mask(mx.array(lengths), 1, narrow)
    sk, sv = _stacked(keys, narrow + 256), _stacked(values, narrow + 256)
    wk, wv = _stacked(keys, wide), _stacked(values, wide)
    own_k = [k[:, :, :n + 1] for k, n in zip(keys, lengths, strict=True)]
    own_v = [v[:, :, :n + 1] for v, n in zip(values, lengths, strict=True)]
    # rows as column ranges of one arena (engine/kv_arena.py): row b at [starts[b], +n+256)
    starts = [sum(n + 256 for n in lengths[:b]) for b in range(len(lengths))]
    ak = mx.concatenate(keys, axis=2)
    av = mx.concatenate(values, axis=2)
    arena_k = [ak[:, :, a:a + n + 1] for a, n in zip(starts, lengths, strict=True)]
    arena_v = [av[:, :, a:a + n + 1] for a, n in zip(starts, lengths, strict=True)]
    mx.eval(q, mask, sk, sv, wk, wv, own_k, own_v, ak, av, arena_k, arena_v)
    scale = DIM**-0.5
    kinds = {
        "one buffer": lambda: native.cache_attention(
            q, sk[:, :, :narrow], sv[:, :, :narrow], scale, mask, packing=packing),
        "one buffer, prompt-wide": lambda: native.cache_attention(
            q, wk[:, :, :narrow], wv[:, :, :narrow], scale, mask, packing=packing),
        "rows of their own": lambda: native.cache_attention_rows(
            q, own_k, own_v, scale, mask, packing=packing),
        "arena ranges": lambda: native.cache_attention_rows(
            q, arena_k, arena_v, scale, mask, packing=packing),
    }
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
    for _ in range(3):
        for step in kinds.values():
            _layers(step)
    for _ in range(rounds):
        for name, step in kinds.items():
            times[name].append(_layers(step))
    return {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
            for name, t in times.items()}


def _writes(lengths: list[int], rounds: int) -> dict:
    """A step's KV write, keys and values, 30 layers: into one buffer (one native.kv_write
    a layer's keys or values) and into rows of their own (one a row). A single op for rows
    of their own would not be in place: MLX gives each output of a multi-output primitive
    the op's inputs, so an input is never donatable and every row would be copied (tried:
    ~69 ms a step here, the buffers copied whole)."""
    n = len(lengths)
    at = mx.array(lengths)
    update = mx.random.normal((n, HKV, 1, DIM))
    starts = mx.array([sum(w + 256 for w in lengths[:b]) + lengths[b] for b in range(n)])
    state = {"one": [mx.zeros((n, HKV, max(lengths) + 256, DIM)) for _ in range(2 * LAYERS)],
             "arena": [mx.zeros((1, HKV, sum(w + 256 for w in lengths), DIM))
                       for _ in range(2 * LAYERS)],
             "rows": [[mx.zeros((1, HKV, w + 256, DIM)) for w in lengths]
                      for _ in range(2 * LAYERS)]}
    mx.eval(update, starts, state["one"], state["rows"], state["arena"])

    def one() -> None:
        state["one"] = [native.kv_write(b, update, at) for b in state["one"]]
        mx.eval(state["one"])

    def per_row() -> None:
        state["rows"] = [[native.kv_write(b, update[i:i + 1], at[i:i + 1])
                          for i, b in enumerate(r)] for r in state["rows"]]
        mx.eval(state["rows"])

    def arena() -> None:
        state["arena"] = [native.kv_write_columns(b, update, starts) for b in state["arena"]]
        mx.eval(state["arena"])

    kinds = {"one buffer": one, "rows of their own, an op each": per_row,
             "arena ranges, one op": arena}
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(rounds):
        for name, step in kinds.items():
            start = time.process_time()
            step()
            times[name].append((time.process_time() - start) * 1000)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    ensure_preloads()
    parser = argparse.ArgumentParser(prog="python -m bench.attention_rows")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--kv-bits", type=int, choices=(8, 4), default=None)
    args = parser.parse_args(argv)
    packing = KvPacking.for_head(args.kv_bits, DIM) if args.kv_bits else None
    mx.random.seed(0)
    decoding = [1000 + 70 * i for i in range(8)]
    print(f"{native.info()}; kv_bits {args.kv_bits}; ms for {LAYERS} layers' attention")
    for label, lengths in (("8 rows", decoding), ("8 rows + a 4,000-key row",
                                                   decoding + [4000])):
        got = _case(lengths, 4000 + 256, packing, args.rounds)
        print(f"{label}: " + ", ".join(f"{k} {w:.2f} (CPU {c:.2f})"
                                         for k, (w, c) in got.items()))
    writes = _writes(decoding, args.rounds)
    print("KV write, 8 rows, CPU ms: " + ", ".join(f"{k} {v:.2f}" for k, v in writes.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
