"""`python -m bench.soak`: does `batchchat serve`'s memory stay within its KV budget under load?

Starts `batchchat serve` on a model (a subprocess), sends `--requests` chat requests with
varied prompts (different lengths and words, and some follow-ups of earlier ones, so the
prefix cache fills with distinct entries), `--concurrency` at a time, samples the server's
resident memory (RSS) every `--sample-s`, and prints the KV budget, RSS at start (the
weights and the runtime, before any request), its peak and end, the prefix cache's entries,
and whether the peak stayed within start + budget + OVERHEAD. A benchmark, not a test:
figures in docs/memory.md.

`--kv-budget old` runs the pre-#28 default (a quarter of physical memory, as the old formula
gave on the CPU backend), through BATCHCHAT_KV_BUDGET_MB.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from app.process_memory import OVERHEAD_BYTES, memory_bound, resident_bytes

from .http_client import HttpResult, Target, chat

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
RSS_METRIC = "batchchat_process_resident_memory_bytes"
OVERHEAD = OVERHEAD_BYTES  # the app's own bound (app/process_memory.py)
WORDS = ("river stone lantern orbit maple copper violin harbor glacier pepper tunnel meadow "
         "signal quartz falcon ember canyon velvet compass thunder orchard basalt nebula "
         "saffron anchor prism willow cobalt beacon tundra mosaic cedar walrus fjord amber "
         "circuit lagoon granite parrot summit vapor indigo marble sparrow delta kelp "
         "ribbon vertex mango plinth cactus cipher harvest juniper krypton lilac magnet "
         "nectar opal puzzle quiver raven sonnet tulip umbra vortex wander yonder zephyr").split()
ASKS = ("Summarize these words as a story:", "Which of these words rhyme?",
        "Sort these words by length:", "Write a haiku using:", "Translate into French:",
        "Count the vowels in:", "Invent a product name from:", "What links these words?")


@dataclass
class Soak:
    budget: int = 0  # bytes, from /metrics
    per_token: int = 0
    rss_start: int = 0
    samples: list[tuple[float, int]] = field(default_factory=list)  # (seconds, RSS)
    entries: int = 0
    used: int = 0
    prefix_bytes: int = 0
    active_start: int = 0  # MLX's live arrays (weights...), from /metrics
    active_end: int = 0
    active_peak: int = 0
    errors: list[str] = field(default_factory=list)
    done: int = 0
    # /metrics read every --metrics-s while busy: where the memory is (MLX's arrays, the KV,
    # glibc's heap) at the sample whose RSS was highest
    at_peak: dict[str, float] = field(default_factory=dict)
    metric_samples: int = 0

    @property
    def peak(self) -> int:
        return max([r for _, r in self.samples] or [self.rss_start])

    @property
    def bound(self) -> int:
        return memory_bound(self.rss_start, self.budget)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n")[0])
    p.add_argument("--model", default="bundled")
    p.add_argument("--requests", type=int, default=400)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--max-words", type=int, default=250,
                   help="longest fresh prompt in words (lengths are uniform from 5)")
    p.add_argument("--kv-budget", default="default",
                   help='"default" (the engine\'s), "old" (a quarter of RAM) or MiB')
    p.add_argument("--sample-s", type=float, default=0.25)
    p.add_argument("--metrics-s", type=float, default=1.0,
                   help="how often /metrics is read while busy (where the memory is)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def old_default_mib() -> int:
    """The pre-#28 default on the CPU backend: a quarter of physical memory (the weights of a
    small model never bound it)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4 // MIB


def conversations(n: int, max_words: int, seed: int) -> list[list[dict[str, str]]]:
    """`n` chats' messages: mostly fresh prompts of 5..max_words words, every fourth a
    follow-up of an earlier chat (its prompt so far plus a reply and a new question)."""
    rng = random.Random(seed)
    out: list[list[dict[str, str]]] = []
    for i in range(n):
        if i % 4 == 3 and out:
            earlier = rng.choice(out)
            reply = " ".join(rng.choices(WORDS, k=rng.randint(5, 30)))
            ask = f"{rng.choice(ASKS)} {' '.join(rng.choices(WORDS, k=rng.randint(3, 40)))}"
            out.append([*earlier, {"role": "assistant", "content": reply},
                        {"role": "user", "content": ask}])
        else:
            words = " ".join(rng.choices(WORDS, k=rng.randint(5, max_words)))
            out.append([{"role": "user", "content": f"#{i} {rng.choice(ASKS)} {words}"}])
    return out


def metrics(text: str) -> dict[str, float]:
    return {name: float(value) for name, value in
            (line.rsplit(" ", 1) for line in text.splitlines()
             if line and not line.startswith("#") and "{" not in line)}


async def start_server(model: str, env: dict[str, str]) -> tuple[asyncio.subprocess.Process,
                                                                  str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "batchchat", "serve", "--model", model, "--port", "0",
        "--served-model-name", "soak", cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    while True:
        line = (await asyncio.wait_for(proc.stdout.readline(), 600)).decode()
        if not line:
            raise RuntimeError(f"batchchat serve exited with {await proc.wait()}")
        if match := re.search(r"ready at (\S+)", line):
            return proc, match.group(1)


async def sample(pid: int, soak: Soak, t0: float, every: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        rss = resident_bytes(pid)
        if rss is not None:
            soak.samples.append((time.perf_counter() - t0, rss))
        try:
            await asyncio.wait_for(stop.wait(), every)
        except TimeoutError:
            pass


async def watch(read: Callable[[], Awaitable[dict[str, float]]], soak: Soak, every: float,
                stop: asyncio.Event) -> None:
    """Keep the /metrics sample whose own RSS figure is the highest seen."""
    while not stop.is_set():
        m = await read()
        soak.metric_samples += 1
        if m.get(RSS_METRIC, 0) >= soak.at_peak.get(RSS_METRIC, 0):
            soak.at_peak = m
        try:
            await asyncio.wait_for(stop.wait(), every)
        except TimeoutError:
            pass


async def run(args: argparse.Namespace) -> Soak:
    env = os.environ | {"BATCHCHAT_API_KEY": ""}
    env.pop("BATCHCHAT_KV_BUDGET_MB", None)
    if args.kv_budget == "old":
        env["BATCHCHAT_KV_BUDGET_MB"] = str(old_default_mib())
    elif args.kv_budget != "default":
        env["BATCHCHAT_KV_BUDGET_MB"] = args.kv_budget
    proc, url = await start_server(args.model, env)
    soak = Soak()
    try:
        target = Target("batchchat", url, "soak")
        timeout = aiohttp.ClientTimeout(total=900)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            async def read_metrics() -> dict[str, float]:
                async with http.get(url[:-3] + "/metrics") as r:
                    return metrics(await r.text())

            m = await read_metrics()
            soak.budget = int(m["batchchat_kv_cache_budget_bytes"])
            soak.per_token = int(m["batchchat_kv_cache_bytes_per_token"])
            soak.rss_start = resident_bytes(proc.pid) or 0
            soak.active_start = int(m.get("batchchat_memory_active_bytes", 0))
            t0 = time.perf_counter()
            stop = asyncio.Event()
            sampler = asyncio.create_task(sample(proc.pid, soak, t0, args.sample_s, stop))
            watcher = asyncio.create_task(watch(read_metrics, soak, args.metrics_s, stop))
            chats = conversations(args.requests, args.max_words, args.seed)
            queue: asyncio.Queue[int] = asyncio.Queue()
            for i in range(len(chats)):
                queue.put_nowait(i)
            sampling = {"temperature": 0.7, "top_p": 0.95}

            async def worker() -> None:
                while not queue.empty():
                    i = queue.get_nowait()
                    r = await chat(http, target, HttpResult(index=i, prompt=""), chats[i],
                                   args.max_tokens, t0,
                                   {**sampling, "seed": args.seed + i})
                    if r.error:
                        soak.errors.append(r.error)
                    soak.done += 1
                    if soak.done % 50 == 0:
                        rss = soak.samples[-1][1] if soak.samples else 0
                        print(f"  {soak.done} requests, RSS {rss / MIB:.0f} MiB",
                              file=sys.stderr, flush=True)

            await asyncio.gather(*(worker() for _ in range(args.concurrency)))
            await asyncio.sleep(1.0)  # the last finishes' KV goes into the cache
            stop.set()
            await sampler
            await watcher
            m = await read_metrics()
            soak.entries = int(m["batchchat_prefix_cache_entries"])
            soak.used = int(m["batchchat_kv_cache_used_bytes"])
            soak.prefix_bytes = int(m["batchchat_prefix_cache_bytes"])
            soak.active_end = int(m.get("batchchat_memory_active_bytes", 0))
            soak.active_peak = int(m.get("batchchat_memory_peak_bytes", 0))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    return soak


def report(args: argparse.Namespace, soak: Soak, wall_s: float) -> str:
    rss = [r for _, r in soak.samples] or [soak.rss_start]
    peak, end, bound = soak.peak, rss[-1], soak.bound
    lines = [
        f"python -m bench.soak --model {args.model} --requests {args.requests} "
        f"--concurrency {args.concurrency} --max-tokens {args.max_tokens} "
        f"--max-words {args.max_words} --kv-budget {args.kv_budget} --seed {args.seed}",
        f"requests: {soak.done} in {wall_s:.0f} s, {len(soak.errors)} errors",
        f"KV budget: {soak.budget / MIB:.0f} MiB ({soak.per_token} bytes a token, "
        f"{soak.budget // max(soak.per_token, 1)} tokens)",
        f"RSS start: {soak.rss_start / MIB:.0f} MiB (weights + runtime, before any request)",
        f"RSS peak:  {peak / MIB:.0f} MiB (+{(peak - soak.rss_start) / MIB:.0f})",
        f"RSS end:   {end / MIB:.0f} MiB (+{(end - soak.rss_start) / MIB:.0f})",
        f"KV at end: {soak.used / MIB:.0f} MiB in use, cached prefixes "
        f"{soak.prefix_bytes / MIB:.0f} MiB in {soak.entries} entries",
        f"MLX live arrays: {soak.active_start / MIB:.0f} MiB at start, "
        f"{soak.active_end / MIB:.0f} at end, {soak.active_peak / MIB:.0f} at most "
        "(the rest of RSS: the runtime, and freed memory the allocator keeps)",
        f"at the highest RSS /metrics saw ({soak.metric_samples} reads): {at_peak(soak)}",
        f"bound: start + budget + {OVERHEAD // MIB} MiB overhead = {bound / MIB:.0f} MiB: "
        f"peak {'within' if peak <= bound else 'ABOVE'} it",
        "RSS over time (s, MiB): " + ", ".join(
            f"{t:.0f} {r / MIB:.0f}" for t, r in soak.samples[::max(1, len(soak.samples) // 12)]),
    ]
    lines += [f"error: {e}" for e in soak.errors[:5]]
    return "\n".join(lines)


def at_peak(soak: Soak) -> str:
    m = soak.at_peak

    def mib(name: str) -> str:
        value = m.get("batchchat_" + name)
        return "?" if value is None else f"{value / MIB:.0f}"

    return (f"RSS {mib('process_resident_memory_bytes')} MiB: MLX live arrays "
            f"{mib('memory_active_bytes')} (their peak so far {mib('memory_peak_bytes')}), "
            f"KV in use {mib('kv_cache_used_bytes')} of {mib('kv_cache_budget_bytes')} "
            f"(cached prefixes {mib('prefix_cache_bytes')} of their cap "
            f"{mib('prefix_cache_budget_bytes')}), glibc in use "
            f"{mib('process_heap_in_use_bytes')}, freed but held "
            f"{mib('process_heap_freed_held_bytes')}, "
            f"{m.get('batchchat_num_requests_running', 0):.0f} running")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t = time.perf_counter()
    soak = asyncio.run(run(args))
    print(report(args, soak, time.perf_counter() - t), flush=True)
    return 1 if soak.errors else 0


if __name__ == "__main__":
    sys.exit(main())
