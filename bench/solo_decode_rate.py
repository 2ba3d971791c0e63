"""`python -m bench.solo_decode_rate FILE.gguf [FILE.gguf ...] [--tokens 48] [--repeat 3]`:
one stream's decode in the engine (its API, in-process) with the tabs' sampling (issue #48):
tok/s from the first token to the last and the process's CPU ms a token, per file, the files
run in turn --repeat times (alternated, so a shared machine's load falls on each alike);
whether the compiled decode step ran (its traces)."""

from __future__ import annotations

import argparse
import os
import time

from engine.preload import ensure_preloads


def solo_rate(engine, tokens: int, seed: int) -> tuple[float, float]:
    """tok/s and CPU ms a token of one request's decode (its first token excluded)."""
    from bench.request_sampling import TABS, RequestSampling

    firsts: list[float] = []
    stream = engine.submit(prompt_tokens=[(i * 7 + seed) % 250 + 3 for i in range(32)],
                           params=RequestSampling("tabs", TABS).params(
                               max_tokens=tokens + 1, seed=seed))
    stream.listen(lambda e: firsts.append(1) if e.token is not None else None)
    while not firsts:
        engine.step()
    start, cpu = time.perf_counter(), time.process_time()
    while engine.has_work():
        engine.step()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return tokens / elapsed, cpu * 1e3 / tokens


def main(argv: list[str] | None = None) -> int:
    ensure_preloads()
    p = argparse.ArgumentParser(prog="python -m bench.solo_decode_rate", description=__doc__)
    p.add_argument("paths", nargs="+")
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    from engine import Engine, EngineConfig
    from engine.loader import load_model

    engines = {}
    for path in args.paths:
        loaded = load_model(path)
        engines[path] = Engine(loaded.model, loaded.tokenizer, eos_token_ids=[],
                               context_length=loaded.context_length,
                               config=EngineConfig(max_concurrent=1))
        solo_rate(engines[path], 4, 0)  # warm: the compiled step traced
    got: dict[str, list[tuple[float, float]]] = {p: [] for p in args.paths}
    for r in range(args.repeat):
        for path in args.paths:
            got[path].append(solo_rate(engines[path], args.tokens, r + 1))
            print(f"  {os.path.basename(path)} run {r}: {got[path][-1][0]:.2f} tok/s, "
                  f"CPU {got[path][-1][1]:.1f} ms a token (load {os.getloadavg()[0]:.1f})",
                  flush=True)
    for path, runs in got.items():
        tps, cpu = sorted(t for t, _ in runs), sorted(c for _, c in runs)
        core = engines[path]._core if hasattr(engines[path], "_core") else None
        traces = getattr(getattr(getattr(core, "runner", None), "compiled", None), "traces", "?")
        print(f"{os.path.basename(path)}: median {tps[len(tps) // 2]:.2f} tok/s, CPU "
              f"{cpu[len(cpu) // 2]:.1f} ms a token; compiled step traces {traces}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
