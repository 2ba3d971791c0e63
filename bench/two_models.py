"""`python -m bench.two_models`: two models at once on the model manager (issue #50).

Loads the bundled model and a second file (`--second`: default the bundled model
re-quantized as Q8_0 by gguf-py into a temporary folder) with app.fleet's ModelManager and
runs, each phase with a fresh set of chats (greedy, `--tokens` each):

- one model alone, `--chats` chats (each model in turn): its tokens/s;
- both models at once, `--chats` chats each: each model's tokens/s, and the two's sum;
- one model, 2 x `--chats` chats: the same number of chats on one engine.

Per phase: aggregate tokens/s, each model's tokens/s (over the phase, and over its own
first to last token), and the inter-token latency p50/p99 of the streams (gaps between a
stream's tokens as the asyncio loop sees them). Two engine threads share the cores: whether
one starves the other shows in the rates over each model's own span (over the whole phase
they are equal by construction when both write all their tokens) and in how long each
model's span is.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from app.fleet import Catalog, ModelManager
from app.models.library import folder_models


def _prompts(n: int, salt: str) -> list[list[dict[str, str]]]:
    topics = ["lighthouses", "bees", "volcanoes", "trains", "tea", "rivers", "owls", "glass"]
    return [[{"role": "user", "content": f"Tell me about {topics[i % len(topics)]} ({salt}{i})."}]
            for i in range(n)]


async def _run(fleet: ModelManager, plan: dict[str, int], tokens: int) -> dict:
    """Run `plan` (model -> chats) all at once; tokens/s and ITL figures."""
    leases = {name: await fleet.acquire(name) for name in plan}
    gaps: list[float] = []
    per_model: dict[str, int] = {name: 0 for name in plan}
    first_last: dict[str, list[float]] = {name: [] for name in plan}

    async def chat(name: str, messages: list[dict[str, str]]) -> None:
        stream = leases[name].target.submit(messages, params={"max_tokens": tokens,
                                                              "temperature": 0.0})
        last = None
        async for event in stream:
            if event.token is None:
                continue
            now = time.perf_counter()
            if last is not None:
                gaps.append(now - last)
            last = now
            first_last[name].append(now)
        per_model[name] += len(stream.tokens)

    start = time.perf_counter()
    await asyncio.gather(*(chat(name, m) for name, n in plan.items()
                           for m in _prompts(n, f"{name}-{start}")))
    wall = time.perf_counter() - start
    for lease in leases.values():
        lease.release()
    gaps.sort()
    out = {"wall_s": wall, "tok_s": sum(per_model.values()) / wall,
           "itl_p50_ms": 1000 * statistics.median(gaps) if gaps else 0.0,
           "itl_p99_ms": 1000 * gaps[int(0.99 * (len(gaps) - 1))] if gaps else 0.0}
    for name, n in per_model.items():
        times = first_last[name]
        span = (max(times) - min(times)) if len(times) > 1 else wall
        out[f"{name} tok/s"] = n / wall
        out[f"{name} tok/s over its own span"] = n / span if span else 0.0
    return out


async def main_async(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench-two-models-"))
    from tests.fleet_models import bundled_path, requantize

    (folder / "smol.gguf").symlink_to(bundled_path())
    if args.second:
        (folder / "second.gguf").symlink_to(Path(args.second).resolve())
    else:
        requantize(bundled_path(), folder / "second.gguf", "Q8_0")
    fleet = ModelManager(Catalog(lambda: folder_models(folder)), max_models=2,
                         max_concurrent=2 * args.chats, kv_budget_bytes=256 << 20)
    try:
        await fleet.load("smol")
        await fleet.load("second")
        await _run(fleet, {"smol": 2, "second": 2}, 8)  # warm both engines up
        phases = [("smol alone", {"smol": args.chats}),
                  ("second alone", {"second": args.chats}),
                  ("both at once", {"smol": args.chats, "second": args.chats}),
                  ("smol, 2x chats", {"smol": 2 * args.chats})]
        for label, plan in phases:
            result = await _run(fleet, plan, args.tokens)
            figures = ", ".join(f"{k} {v:.1f}" for k, v in result.items())
            print(f"{label}: {figures}", flush=True)
    finally:
        await fleet.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chats", type=int, default=8, help="chats a model (default 8)")
    p.add_argument("--tokens", type=int, default=128, help="tokens a chat (default 128)")
    p.add_argument("--second", default=None, help="the second model's .gguf")
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
