"""`python -m bench.kquant_kernel FILE.gguf [--rows 1 8] [--rounds 6] [--types Q5_0,Q4_1]`:
the packed kernel over every matrix of the given types in a GGUF (issue #48; default the
K-quants and llama.cpp's fallback types Q5_0 / Q5_1, and Q4_1), held both ways in one
process: in the types' own forms (src/packed.h: Q4_K 4.5, Q5_K 5.5, Q6_K 6.5625, Q5_0 5.5,
Q5_1 6.0, Q4_1 5.0 bits a weight: the file's) and in the affine form they were held in
before (float32 scale and bias a group: 6.0, 10.0, 12.0, 10.0, 10.0, 6.0).

One "pass" is x @ W.T for every such matrix, each its own op, evaluated together (what a
decode step's linears read). The two forms alternate pass by pass (A B B A a round), so a
busy machine's drift falls on both alike; every pass's outputs are checked equal between
the forms (bit for bit). Prints the median wall ms and CPU ms a pass per form and row count.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from engine.preload import ensure_preloads


def main(argv: list[str] | None = None) -> int:
    ensure_preloads()
    p = argparse.ArgumentParser(prog="python -m bench.kquant_kernel", description=__doc__)
    p.add_argument("path")
    p.add_argument("--rows", type=int, nargs="+", default=[1, 8])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--types", default="Q4_K,Q5_K,Q6_K,Q5_0,Q5_1,Q4_1")
    args = p.parse_args(argv)
    import mlx.core as mx
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    from engine import native
    from engine.loader.ggml_types import to_affine
    from engine.loader.gguf_file import read_gguf_file
    from engine.loader.packed_form import Prepacked

    ext = native.extension()
    kinds = tuple(GGMLQuantizationType[name] for name in args.types.split(","))
    f = read_gguf_file(Path(args.path))
    forms: dict[str, list] = {"K forms": [], "affine": []}
    nbytes = {"K forms": 0, "affine": 0}
    for t in f.tensors.values():
        if t.kind not in kinds or t.data.ndim != 2:
            continue
        block, size = GGML_QUANT_SIZES[t.kind]
        n, k = t.data.shape[0], t.data.shape[1] // size * block
        pk = Prepacked(*ext.ggml_to_packed_arrays(int(t.kind), t.data.reshape(-1), n, k))
        a = to_affine(t.data, t.kind)
        old = ext.pack_quantized(mx.array(a.packed), mx.array(a.scales), mx.array(a.biases),
                                 a.group, a.bits)
        group, bits = pk.kernel_layout(a.group, a.bits)
        forms["K forms"].append((pk.arrays(), n, k, group, bits, pk.form))
        forms["affine"].append((list(old), n, k, a.group, a.bits, 0))
        nbytes["K forms"] += sum(x.nbytes for x in pk.arrays())
        nbytes["affine"] += sum(x.nbytes for x in old)
    count = len(forms["affine"])
    print(f"{count} matrices ({args.types}): K forms {nbytes['K forms'] / 2**20:.0f} MiB, affine "
          f"{nbytes['affine'] / 2**20:.0f} MiB", flush=True)

    def run(name: str, xs: dict[int, mx.array]) -> tuple[float, float, list[mx.array]]:
        outs = [ext.packed_matvec_many(xs[k], arrays, [n], group, bits, form=form)[0]
                for arrays, n, k, group, bits, form in forms[name]]
        start, cpu = time.perf_counter(), time.process_time()
        mx.eval(outs)
        return time.perf_counter() - start, time.process_time() - cpu, outs

    for rows in args.rows:
        ks = {k for _, _, k, _, _, _ in forms["affine"]}
        xs = {k: mx.random.normal((rows, k), key=mx.random.key(k)) for k in ks}
        mx.eval(list(xs.values()))
        wall: dict[str, list[float]] = {"K forms": [], "affine": []}
        cpu: dict[str, list[float]] = {"K forms": [], "affine": []}
        run("affine", xs)
        run("K forms", xs)  # warm: first touches
        for _ in range(args.rounds):
            got = {}
            for name in ("affine", "K forms", "K forms", "affine"):
                w, c, outs = run(name, xs)
                wall[name].append(w * 1e3)
                cpu[name].append(c * 1e3)
                got[name] = outs
            assert all(mx.array_equal(a, b).item()
                       for a, b in zip(got["affine"], got["K forms"], strict=True))
        for name in ("affine", "K forms"):
            print(f"  {rows} rows, {name}: {statistics.median(wall[name]):.1f} ms a pass "
                  f"(min {min(wall[name]):.1f}), CPU {statistics.median(cpu[name]):.1f} ms "
                  f"(min {min(cpu[name]):.1f}); {len(wall[name])} passes", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
