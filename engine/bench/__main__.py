"""`python -m engine.bench`: the engine against mlx-lm, measured in the same process."""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from ..blas import ensure_fast_blas

ALL = ("physical", "solo", "offline", "online", "hol")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m engine.bench", description=__doc__)
    p.add_argument("--model", default="bundled")
    p.add_argument("--scenarios", default=",".join(ALL),
                   help=f"comma-separated subset of {','.join(ALL)}")
    p.add_argument("--concurrency", default="1,4,8,16,32")
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--offline-priority", default="background,interactive",
                   help="priority classes of the offline requests; the first is the headline")
    p.add_argument("--peer-kernels", action="store_true",
                   help="also run BatchGenerator with the engine's CPU kernels (offline)")
    p.add_argument("--online-requests", type=int, default=32)
    p.add_argument("--online-rate", type=float, default=0.5)
    p.add_argument("--burstiness", type=float, default=1.0)
    p.add_argument("--long-prompt", type=int, default=2000)
    p.add_argument("--out", type=Path, default=Path("bench-out"))
    return p.parse_args(argv)


async def run(args: argparse.Namespace, loaded: Any | None = None) -> dict[str, Any]:
    from . import physical, scenarios

    if loaded is None:
        from ..loader import load_model

        loaded = load_model(args.model)
    scen = set(args.scenarios.split(","))
    conc = [int(c) for c in args.concurrency.split(",")]
    engine = scenarios.make_engine(loaded, max(conc + [8]) + 1)
    await engine.start()
    results: dict[str, Any] = {"model": getattr(loaded, "description", args.model),
                               "args": {k: str(v) for k, v in vars(args).items()},
                               "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        texts = scenarios.prompt_texts(max(conc + [16]))
        prompts = [scenarios.chat_tokens(engine, t) for t in texts]
        results["prompt_tokens_mean"] = sum(map(len, prompts)) / len(prompts)
        if "physical" in scen:
            from mlx.utils import tree_flatten

            params = tree_flatten(engine.model.parameters())
            results["physical"] = physical.reference(
                sum(v.size for _, v in params), sum(v.nbytes for _, v in params))
        if "solo" in scen:
            results["solo"] = await scenarios.solo(engine, prompts[0], args.new_tokens,
                                                   args.repeats)
        if "offline" in scen:
            results["offline"] = await scenarios.offline(
                engine, prompts, args.new_tokens, conc, args.repeats,
                tuple(args.offline_priority.split(",")), args.peer_kernels)
        if "online" in scen:
            results["online"] = await scenarios.online(
                engine, texts, args.online_rate, args.online_requests, args.new_tokens,
                args.burstiness)
        if "hol" in scen:
            long_text = " ".join(texts) * 10
            long_prompt = scenarios.chat_tokens(engine, long_text)[: args.long_prompt]
            results["head_of_line"] = {
                "engine": await scenarios.head_of_line(engine, prompts, long_prompt,
                                                       args.new_tokens * 4),
                "batch_generator": scenarios.head_of_line_batch_generator(
                    engine, prompts, long_prompt, args.new_tokens * 4),
            }
        if "physical" in results and "solo" in results and results.get("offline"):
            p = results["physical"]
            results["fractions"] = {
                "solo_of_floor": p["decode_floor_s"] * results["solo"]["engine_decode_tps"],
                "batch_of_ceiling": results["offline"][-1]["engine_decode_tps"]
                / p["ceiling_tps"],
            }
    finally:
        await engine.shutdown()
    return results


def main(argv: list[str] | None = None) -> int:
    ensure_fast_blas()
    args = parse_args(argv)
    from . import report

    results = asyncio.run(run(args))
    args.out.mkdir(parents=True, exist_ok=True)
    report.print_table(results)
    path = report.write_json(results, args.out)
    plots = report.plot(results, args.out)
    print(f"\nwrote {path}" + "".join(f", {p}" for p in plots))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

