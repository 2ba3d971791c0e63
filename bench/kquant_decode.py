"""`python -m bench.kquant_decode FILE.gguf [--rows 1 8] [--tokens 32] [--repeat 2]`: a GGUF's
load time, resident memory and decode speed in the engine (issue #48: K-quants held near
their file's width in the packed kernel).

Prints one line each: the load (seconds, resident MiB after it and after the engine's
install, the bytes of the packed weights a weight), then per row count the decode rate
(`bench.arch_decode.decode_rate`: tok/s over all rows and the process's CPU ms a token,
prefill excluded), medians of `--repeat` runs. To compare two trees, run it from each with
that tree first on the path, alternating:

    PYTHONPATH=/work/main  python /work/wt48/bench/kquant_decode.py FILE   # before
    PYTHONPATH=/work/wt48  python /work/wt48/bench/kquant_decode.py FILE   # after
"""

from __future__ import annotations

import argparse
import time

from engine.preload import ensure_preloads


def _status_mib(key: str) -> float:
    """A /proc/self/status memory line (VmRSS, VmHWM) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def _packed_bits(model) -> tuple[float, int]:
    """Bits a weight of the loader's packed copies, and their bytes."""
    from engine.loader.packed_form import prepacked

    nbytes = weights = 0
    for _, m in model.named_modules():
        pk = prepacked(m)
        if pk is None:
            continue
        nbytes += sum(a.nbytes for a in pk.arrays())
        w = m["weight"]
        weights += w.size * 32 // m.bits  # uint32 words of `bits`-bit values: the weights
    return (nbytes * 8 / weights if weights else 0.0), nbytes


def main(argv: list[str] | None = None) -> int:
    ensure_preloads()
    p = argparse.ArgumentParser(prog="python -m bench.kquant_decode", description=__doc__)
    p.add_argument("path")
    p.add_argument("--rows", type=int, nargs="+", default=[1, 8])
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args(argv)
    import engine
    from bench.arch_decode import decode_rate
    from engine.loader import load_model
    from engine.model_runner import ModelRunner

    start = time.perf_counter()
    loaded = load_model(args.path)
    load_s = time.perf_counter() - start
    rss_load = _status_mib("VmRSS")
    bits, nbytes = _packed_bits(loaded.model)
    ModelRunner(loaded.model)  # the engine's install (each Engine below makes its own)
    print(f"tree {engine.__file__.rsplit('/engine/', 1)[0]}: load {load_s:.1f} s, RSS "
          f"{rss_load:.0f} MiB after load, {_status_mib('VmRSS'):.0f} MiB after install; "
          f"packed weights {nbytes / 2**20:.0f} MiB, {bits:.2f} bits a weight", flush=True)
    for rows in args.rows:
        got = sorted(decode_rate(loaded, rows, args.tokens) for _ in range(args.repeat))
        tps, cpu = sorted(g[0] for g in got), sorted(g[1] for g in got)
        mid = len(got) // 2
        print(f"  {rows} rows: {1e3 / tps[mid] * rows:.1f} ms a step, {tps[mid]:.2f} tok/s "
              f"(runs {', '.join(f'{t:.2f}' for t in tps)}); CPU {cpu[mid]:.1f} ms a token "
              f"(runs {', '.join(f'{c:.1f}' for c in cpu)})", flush=True)
    print(f"  peak RSS {_status_mib('VmHWM'):.0f} MiB", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
