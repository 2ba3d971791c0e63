"""Benchmark quantized_matvec against MLX's CPU quantized matmul and float32 + OpenBLAS.

    python -m bench.kernels.matvec [--reps 25] [--rows 1,4,16,32]

Shapes are the bundled model's linears (SmolLM2-135M: 4-bit, group 32, float16 scales; the
tied lm_head 8-bit). All three candidates run interleaved in one process; each sample times
a batch of independent calls evaluated together (as in a forward pass), and the table shows
per-call medians. The process re-executes itself with OpenBLAS preloaded (engine.blas).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from engine.blas import is_fast_blas_loaded
from engine.preload import ensure_preloads

# (name, N out, K in, bits, count per decode step)
SHAPES = [
    ("q/o_proj", 576, 576, 4, 60),
    ("k/v_proj", 192, 576, 4, 60),
    ("gate/up", 1536, 576, 4, 60),
    ("down", 576, 1536, 4, 30),
    ("lm_head", 49152, 576, 8, 1),
]
GROUP = 32


def _time_batch(fn, inner: int) -> float:
    import mlx.core as mx

    t0 = time.perf_counter()
    mx.eval(*[fn() for _ in range(inner)])
    return (time.perf_counter() - t0) / inner


def _candidates(x, q, s, b, wf, bits: int, packed: list) -> dict:
    import mlx.core as mx

    from engine import native

    return {
        # the engine's kernel for every row count since issue #25 (src/packed.h)
        "packed": lambda: native.packed_matvec_many(x, [packed], [q.shape[0]], GROUP, bits)[0],
        "native": lambda: native.quantized_matvec(x, q, s, b, GROUP, bits),
        "native_i8": lambda: native.quantized_matvec(x, q, s, b, GROUP, bits, int8_x=True),
        "mlx_q": lambda: mx.quantized_matmul(x, q, s, b, transpose=True, group_size=GROUP,
                                             bits=bits),
        "f32": lambda: x @ wf.T,
        # what engine.native.layers does above its row limit: no float32 copy kept
        "deq_f32": lambda: x @ native.dequantize_f32(q, s, b, GROUP, bits).T,
    }


def run(reps: int, rows: list[int]) -> list[dict]:
    import mlx.core as mx

    from engine import native

    if not native.available():
        raise SystemExit(f"engine.native unavailable: {native.unavailable_reason()}")
    results = []
    for name, n, k, bits, count in SHAPES:
        mx.random.seed(0)
        w = (mx.random.normal((n, k)) * 0.05).astype(mx.float16)
        q, s, b = mx.quantize(w, group_size=GROUP, bits=bits)
        wf = mx.dequantize(q, s.astype(mx.float32), b.astype(mx.float32), group_size=GROUP,
                           bits=bits)
        mx.eval(q, s, b, wf)
        packed = native.pack_quantized(q, s, b, GROUP, bits)
        for m in rows:
            x = mx.random.normal((m, k))
            mx.eval(x)
            cands = _candidates(x, q, s, b, wf, bits, packed)
            # ~2 ms a sample for the fastest candidate; warm up each first
            t1 = min(_time_batch(f, 3) for f in cands.values())
            inner = max(1, min(200, int(2e-3 / max(t1, 1e-7))))
            for f in cands.values():
                _time_batch(f, inner)
            times: dict[str, list[float]] = {c: [] for c in cands}
            for _ in range(reps):
                for c, f in cands.items():
                    times[c].append(_time_batch(f, inner))
            med = {c: statistics.median(v) for c, v in times.items()}
            results.append(dict(name=name, n=n, k=k, bits=bits, m=m, count=count, **med))
    return results


def table(results: list[dict]) -> str:
    lines = ["| shape (N x K, bits) | M | packed us | native us | native int8-x us | MLX q us "
             "| f32+BLAS us | deq+f32 us | MLX q / native | f32 / native | deq+f32 / native "
             "| deq+f32 / packed |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(
            f"| {r['name']} {r['n']}x{r['k']} {r['bits']}b | {r['m']} | {r['packed']*1e6:.1f} "
            f"| {r['native']*1e6:.1f} "
            f"| {r['native_i8']*1e6:.1f} "
            f"| {r['mlx_q']*1e6:.1f} | {r['f32']*1e6:.1f} | {r['deq_f32']*1e6:.1f} "
            f"| {r['mlx_q']/r['native']:.2f} | {r['f32']/r['native']:.2f} "
            f"| {r['deq_f32']/r['native']:.2f} | {r['deq_f32']/r['packed']:.2f} |")
    return "\n".join(lines)


def projection(results: list[dict]) -> str:
    """Sum of all linears of one decode step (30 layers + lm_head) per M and candidate."""
    out = ["| M | packed ms | native ms | native int8-x ms | MLX q ms | f32+BLAS ms "
           "| deq+f32 ms | best |",
           "|---|---|---|---|---|---|---|---|"]
    for m in sorted({r["m"] for r in results}):
        tot = {c: sum(r[c] * r["count"] for r in results if r["m"] == m)
               for c in ("packed", "native", "native_i8", "mlx_q", "f32", "deq_f32")}
        best = min(tot, key=tot.get)
        out.append(f"| {m} | {tot['packed']*1e3:.2f} | {tot['native']*1e3:.2f} "
                   f"| {tot['native_i8']*1e3:.2f} "
                   f"| {tot['mlx_q']*1e3:.2f} "
                   f"| {tot['f32']*1e3:.2f} | {tot['deq_f32']*1e3:.2f} | {best} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ensure_preloads()
    parser = argparse.ArgumentParser(prog="python -m bench.kernels.matvec")
    parser.add_argument("--reps", type=int, default=25)
    parser.add_argument("--rows", default="1,4,16,32")
    parser.add_argument("--threads", type=int, default=0, help="kernel threads (0: default)")
    args = parser.parse_args(argv)
    from engine import native

    if args.threads:
        native.set_threads(args.threads)
    print(native.info(), "| OpenBLAS preloaded:", is_fast_blas_loaded())
    results = run(args.reps, [int(v) for v in args.rows.split(",")])
    print(table(results))
    print()
    print("Linears of one decode step (30 layers x 7 + lm_head), sum of medians:")
    print(projection(results))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
