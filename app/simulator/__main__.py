"""Headless load simulation: `python -m app.simulator --requests 20 --arrival poisson --rate 2`.

The same SimulationRun the app's simulator panel uses; prints each request as it ends and
a summary, optionally saves the run to the history database and writes JSON. Against the
local engine by default, or any OpenAI-compatible server with `--target URL` (goodput under
`--slo-ttft/--slo-tpot/--slo-e2e` limits, as `vllm bench serve --goodput`).
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
from .goodput import Slo
from .run import LoadTarget, SimRow, SimulationRun

if TYPE_CHECKING:
    from app.storage import Store


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m app.simulator", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default=None,
                   help="local: bundled (default), a .gguf, an mlx-lm dir or repo; with "
                        "--target: the server's model name (default: the only one it lists)")
    p.add_argument("--target", default=None,
                   help="an OpenAI-compatible server's URL (http://host:port[/v1]) instead "
                        "of the local engine")
    p.add_argument("--api-key", default=None, help="--target: sent as a Bearer token")
    p.add_argument("--connect-timeout", type=float, default=10.0,
                   help="--target: seconds to wait for a connection")
    p.add_argument("--read-timeout", type=float, default=120.0,
                   help="--target: longest silence (s) before a request fails")
    p.add_argument("--slo-ttft", type=float, default=None, help="goodput: TTFT limit (s)")
    p.add_argument("--slo-tpot", type=float, default=None, help="goodput: TPOT limit (s)")
    p.add_argument("--slo-e2e", type=float, default=None,
                   help="goodput: end-to-end latency limit (s)")
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
    p.add_argument("--concurrency", type=int, default=16,
                   help="engine concurrency limit (--target: requests in flight at once)")
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
        max_concurrent=args.concurrency, seed=args.seed, slo_ttft_s=args.slo_ttft,
        slo_tpot_s=args.slo_tpot, slo_e2e_s=args.slo_e2e,
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


async def simulate(target: LoadTarget, cfg: SimConfig, store: Store | None = None, *,
                   quiet: bool = False, title: str | None = None) -> SimulationRun:
    """Run one simulation on a started target; Ctrl+C stops it cleanly (all accounted)."""
    run = SimulationRun(target, cfg, store, title)
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
    preview = row.error[:120] if row.error else row.reply.replace("\n", " ")[:40]
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
                      ("e2e_s", "E2E"), ("ttfat_s", "TTFAT")):
        d = summary.get(key)
        if not d or not d["n"] and key == "ttfat_s":  # no reasoning model's replies
            continue
        lines.append(f"{name:<6} " + " ".join(f"{d[k] * 1000:>7.0f}ms"
                                             for k in ("median", "p90", "p99", "mean")))
    if summary.get("goodput") is not None:
        slo = Slo(**summary["slo"])
        lines.append(f"goodput {summary['goodput']:.2f} req/s: {summary['slo_met']} of "
                     f"{summary['completed']} completed requests met {slo.describe()}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from engine.public import ensure_preloads

    ensure_preloads()
    args = parse_args(argv)
    from engine.public import CpuOptions, CpuOptionsError

    try:
        cfg = config_from_args(args)
        args.cpu = CpuOptions.from_env()  # the engine's CPU switches, read once here
    except (SimConfigError, CpuOptionsError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_main(args, cfg))


async def _main(args: argparse.Namespace, cfg: SimConfig) -> int:
    if args.target is None:
        from app.backend.local_target import engine_config, max_concurrent_limit

        limit = max_concurrent_limit()  # every running request takes a token of each tick
        if (cfg.max_concurrent or 16) > limit:
            print(f"error: --concurrency: must be from 1 to {limit}, got {cfg.max_concurrent}",
                  file=sys.stderr)
            return 2
        try:
            engine_config(max_concurrent=cfg.max_concurrent or 16, cpu=args.cpu)
        except ValueError as exc:  # a setting from the environment (BATCHCHAT_*) the engine
            print(f"error: {exc}", file=sys.stderr)  # refuses; --concurrency is checked above
            return 2
    store = None
    if args.save:
        from app.storage import StorageError, Store

        try:
            store = Store.open(args.db)
        except StorageError as exc:
            print(f"error: --save: {exc}", file=sys.stderr)
            return 1
    try:
        if args.target is not None:
            run = await _run_remote(args, cfg, store)
        else:
            run = await _run_local(args, cfg, store)
    finally:
        if store is not None:
            store.close()
    if run is None:
        return 1
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
    failed = [r for r in run.results if r.finish_reason == "error"]
    if failed and len(failed) == len(run.results):  # nothing got through: say why, exit 1
        print(f"error: every request failed, e.g. {failed[0].error}", file=sys.stderr)
        return 1
    return 0


async def _run_local(args: argparse.Namespace, cfg: SimConfig,
                     store: Store | None) -> SimulationRun | None:
    from app.backend import LocalBackend
    from app.backend.local_target import load_target
    from engine.public import ModelLoadError

    model = args.model or "bundled"
    print(f"Loading {model} …", file=sys.stderr)
    try:
        target = load_target(model, max_concurrent=cfg.max_concurrent or 16, cpu=args.cpu)
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    await target.start()
    print(f"{target.description}; {cfg.describe()}", file=sys.stderr)
    try:
        return await simulate(LocalBackend(target), cfg, store, quiet=args.quiet)
    finally:
        await target.shutdown()


async def _run_remote(args: argparse.Namespace, cfg: SimConfig,
                      store: Store | None) -> SimulationRun | None:
    from app.backend import RemoteBackend
    from app.remote import Connection, ConnectionConfigError, RemoteClient, RemoteError

    try:
        conn = Connection(args.target, model=args.model or "", api_key=args.api_key,
                          connect_timeout_s=args.connect_timeout,
                          read_timeout_s=args.read_timeout)
    except ConnectionConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    client = RemoteClient(conn)
    try:
        if not conn.model:  # the server's only model, else the user must pick one
            try:
                models = await client.models()
            except RemoteError as exc:
                print(f"error: {exc} (give --model)", file=sys.stderr)
                return None
            if len(models) != 1:
                print(f"error: {conn.name} serves {len(models)} models; pick one with --model:"
                      f" {', '.join(models)}", file=sys.stderr)
                return None
            client.connection = conn = conn.with_model(models[0])
        target = RemoteBackend(client, cfg.max_concurrent or 16)
        print(f"{conn.describe()} at {conn.base_url}; {cfg.describe()}", file=sys.stderr)
        return await simulate(target, cfg, store, quiet=args.quiet,
                              title=f"Simulation against {conn.describe()}: {cfg.describe()}")
    finally:
        await client.close()


if __name__ == "__main__":
    sys.exit(main())
