"""Headless load simulation: `python -m app.simulator --requests 20 --arrival poisson --rate 2`.

The same SimulationRun the app's simulator panel uses; prints each request as it ends and
a summary, optionally saves the run to the history database and writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import SimConfig, SimConfigError
from .run import LoadTarget, SimRow, SimulationRun

if TYPE_CHECKING:
    from app.storage import Store


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m app.simulator", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="bundled", help="bundled, a .gguf, an mlx-lm dir or repo")
    p.add_argument("--requests", type=int, default=20, help="0 = no limit (needs --duration)")
    p.add_argument("--duration", type=float, default=None, help="stop sending after N seconds")
    p.add_argument("--arrival", choices=("uniform", "poisson", "burst"), default="uniform")
    p.add_argument("--low", type=float, default=0.5, help="uniform: shortest gap (s)")
    p.add_argument("--high", type=float, default=2.0, help="uniform: longest gap (s)")
    p.add_argument("--rate", type=float, default=1.0, help="poisson: requests per second")
    p.add_argument("--burst-size", type=int, default=4)
    p.add_argument("--burst-every", type=float, default=5.0, help="seconds between bursts")
    p.add_argument("--max-tokens", default="32:128", help="MIN:MAX new tokens per request")
    p.add_argument("--sampling", choices=("fixed", "random"), default="fixed")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--cancel", type=float, default=0.0, help="probability of a mid-stream cancel")
    p.add_argument("--concurrency", type=int, default=16, help="engine concurrency limit")
    p.add_argument("--templates", type=Path, default=None,
                   help="a file of prompt templates, one per line ({topic}, {n} allowed)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--save", action="store_true", help="save the run to the history database")
    p.add_argument("--db", default=None, help="history database for --save (default: the app's)")
    p.add_argument("--json", type=Path, default=None, help="write the summary and results here")
    p.add_argument("--quiet", action="store_true", help="no line per request")
    return p.parse_args(argv)


def config_from_args(args: argparse.Namespace) -> SimConfig:
    try:
        lo, _, hi = args.max_tokens.partition(":")
        tokens = (int(lo), int(hi or lo))
    except ValueError:
        raise SimConfigError(f"--max-tokens wants MIN:MAX, got {args.max_tokens!r}") from None
    cfg = SimConfig(
        arrival=args.arrival, uniform_low_s=args.low, uniform_high_s=args.high, rate=args.rate,
        burst_size=args.burst_size, burst_every_s=args.burst_every,
        num_requests=args.requests or None, duration_s=args.duration,
        max_tokens_min=tokens[0], max_tokens_max=tokens[1], sampling=args.sampling,
        temperature=args.temperature, top_p=args.top_p, cancel_probability=args.cancel,
        max_concurrent=args.concurrency, seed=args.seed,
    )
    if args.templates is not None:
        try:
            lines = args.templates.read_text("utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise SimConfigError(f"--templates {args.templates}: not UTF-8 text ({exc})") from None
        cfg.templates = [line for line in lines if line.strip()]
    if args.json is not None and not args.json.parent.is_dir():
        raise SimConfigError(f"--json {args.json}: the folder {args.json.parent} does not exist")
    return cfg.validate()


async def simulate(engine: LoadTarget, cfg: SimConfig, store: Store | None = None, *,
                   quiet: bool = False) -> SimulationRun:
    """Run one simulation on a started engine; Ctrl+C stops it cleanly (all accounted)."""
    run = SimulationRun(engine, cfg, store)
    if not quiet:
        run.completed.connect(lambda row: print(format_row(row), flush=True))
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, run.stop)
    except (NotImplementedError, RuntimeError):  # Windows, or not the main thread
        pass
    try:
        await run.start()
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError):
            pass
    return run


def format_row(row: SimRow) -> str:
    ttft = f"{row.ttft_s:.2f}s" if row.ttft_s is not None else "-"
    rate = f"{row.tokens_per_s:.1f}" if row.tokens_per_s else "-"
    preview = row.reply.replace("\n", " ")[:40]
    return (f"#{row.index + 1:<4} {row.finish_reason:<9} {row.output_tokens:>4} tok  "
            f"ttft {ttft:>7}  {rate:>6} tok/s  {preview}")


def format_summary(summary: dict[str, Any]) -> str:
    lines = [
        f"requests {summary['requests']}: completed {summary['completed']}, cancelled "
        f"{summary['cancelled']}, failed {summary['failed']}"
        + (" (stopped early)" if summary.get("stopped") else ""),
        f"duration {summary['duration_s']:.1f} s, {summary['request_throughput']:.2f} req/s, "
        f"{summary['output_throughput']:.1f} output tok/s ({summary['total_output_tokens']} "
        "tokens)",
        f"{'metric':<6} {'p50':>9} {'p90':>9} {'p99':>9} {'mean':>9}",
    ]
    for key, name in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"),
                      ("e2e_s", "E2E")):
        d = summary[key]
        lines.append(f"{name:<6} " + " ".join(f"{d[k] * 1000:>7.0f}ms"
                                             for k in ("median", "p90", "p99", "mean")))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from engine.blas import ensure_fast_blas

    ensure_fast_blas()
    args = parse_args(argv)
    try:
        cfg = config_from_args(args)
    except (SimConfigError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_main(args, cfg))


async def _main(args: argparse.Namespace, cfg: SimConfig) -> int:
    from engine import Engine, EngineConfig
    from engine.loader import ModelLoadError

    try:
        config = EngineConfig(max_concurrent=cfg.max_concurrent or 16)
    except ValueError as exc:  # e.g. a concurrency beyond what the token budget allows
        print(f"error: --concurrency: {exc}", file=sys.stderr)
        return 2
    store = None
    if args.save:
        from app.storage import StorageError, Store

        try:
            store = Store.open(args.db)
        except StorageError as exc:
            print(f"error: --save: {exc}", file=sys.stderr)
            return 1
    print(f"Loading {args.model} …", file=sys.stderr)
    try:
        engine = Engine.load(args.model, config)
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if store is not None:
            store.close()
        return 1
    await engine.start()
    print(f"{engine.description}; {cfg.describe()}", file=sys.stderr)
    try:
        run = await simulate(engine, cfg, store, quiet=args.quiet)
    finally:
        await engine.shutdown()
        if store is not None:
            store.close()
    assert run.summary is not None
    print(format_summary(run.summary))
    if args.json is not None:
        try:
            args.json.write_text(json.dumps(
                {"config": run.record.config, "summary": run.summary,
                 "results": [r.to_dict() for r in run.results]}, indent=2))
        except OSError as exc:
            print(f"error: --json: could not write {args.json}: {exc}", file=sys.stderr)
            return 1
    if store is not None:
        print(f"saved as simulation run {run.record.id}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
