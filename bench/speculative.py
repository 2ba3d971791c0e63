"""`python -m bench.speculative`: what speculative decoding gives, over HTTP, one client.

    python -m bench.speculative [--repeats 3] [--llama-server PATH] [--out DIR]

Starts the servers it compares (each on its own port, all loaded before the first request,
idle while another is measured): BatchChat's `serve` with `--speculative off` and with
`--speculative ngram`, and, given `--llama-server`, llama.cpp's server on the same GGUF with
and without `--spec-type ngram-simple` (`-np 16 -c 65536 -t 2 --poll 0`). Then, for each
repeat, each scenario on each server in turn (A B C D, then again), so the servers share
the machine's state alike:

- code: one stream, prompts that ask to reproduce or lightly edit a given piece of code,
  greedy, 256 tokens: decode tok/s ((tokens - 1) / (E2E - TTFT)), median over the prompts;
- story: one stream, open-ended prompts, the tabs' sampling: decode tok/s;
- chats: 8 chats x 4 turns at once, the tabs' sampling: output tok/s;
- burst: 16 requests at once, the tabs' sampling: output tok/s.

Prints medians over the repeats and each server's ratio to BatchChat without speculation,
and BatchChat's draft acceptance and tokens per step from its /metrics.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from .http_client import Target
from .request_sampling import GREEDY, TABS
from .scenarios import prompt_texts
from .serving import multi_turn, one_stream, online

CODE = [
    '''def merge_sorted(a, b):
    """Merge two sorted lists into one sorted list."""
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    out.extend(a[i:])
    out.extend(b[j:])
    return out
''',
    '''class Stack:
    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)

    def pop(self):
        if not self.items:
            raise IndexError("pop from an empty stack")
        return self.items.pop()

    def peek(self):
        if not self.items:
            raise IndexError("peek at an empty stack")
        return self.items[-1]

    def __len__(self):
        return len(self.items)
''',
    '''def read_config(path):
    settings = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, value = line.split("=", 1)
            settings[key.strip()] = value.strip()
    return settings
''',
]
ASKS = ["Repeat this code exactly, in a Python code block:\n\n",
        "Rename every variable called `out` or `items` to `result` and show the whole code:\n\n",
        "Add a short comment above each line of this code and show it:\n\n"]


def code_prompts() -> list[str]:
    return [ask + code for code in CODE for ask in ASKS]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process, started from a command with `{port}` in it."""

    def __init__(self, name: str, command: str) -> None:
        self.name = name
        self.port = free_port()
        self.command = command.format(port=self.port, python=sys.executable)
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = Path(f"/tmp/bench-speculative-{name}.log")

    def start(self) -> None:
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(shlex.split(self.command), stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    async def ready(self, session: aiohttp.ClientSession, timeout_s: float = 300) -> str:
        """The model id it serves, once it answers."""
        t = time.perf_counter()
        while time.perf_counter() - t < timeout_s:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: see {self.log}")
            try:
                async with session.get(f"{self.url}/models") as r:
                    if r.status == 200:
                        return (await r.json())["data"][0]["id"]
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.5)
        raise RuntimeError(f"{self.name} did not start in {timeout_s} s: see {self.log}")

    async def metrics(self, session: aiohttp.ClientSession) -> dict[str, float]:
        """BatchChat's /metrics as name -> value (the unlabelled lines)."""
        try:
            async with session.get(f"http://127.0.0.1:{self.port}/metrics") as r:
                text = await r.text() if r.status == 200 else ""
        except aiohttp.ClientError:
            return {}
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#") and "{" not in line:
                name, _, value = line.rpartition(" ")
                try:
                    out[name] = float(value)
                except ValueError:
                    pass
        return out

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


async def scenario(name: str, session: aiohttp.ClientSession, target: Target,
                   args: argparse.Namespace, salt: str) -> float:
    """One run of a scenario: its figure (tok/s)."""
    if name == "code":
        texts = [salt + t for t in code_prompts()][: args.code_prompts]
        res = await one_stream(session, target, texts, len(texts), args.code_tokens, GREEDY)
        return res["decode_tps_median"]
    if name == "story":
        texts = [salt + t for t in prompt_texts(args.story_prompts)]
        res = await one_stream(session, target, texts, len(texts), args.story_tokens, TABS)
        return res["decode_tps_median"]
    if name == "chats":
        texts = [salt + t for t in prompt_texts(8)]
        res = await multi_turn(session, target, texts, 8, 4, args.chat_tokens, TABS)
        return res["output_throughput"]
    if name == "burst":
        texts = [salt + t for t in prompt_texts(16)]
        res = await online(session, target, texts, iter(lambda: 0.0, None), 16,
                           args.burst_tokens, TABS)
        return res["output_throughput"]
    raise ValueError(name)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    servers = [Server(n, c) for n, c in args.servers]
    for s in servers:
        s.start()
    timeout = aiohttp.ClientTimeout(total=None, sock_read=args.timeout)
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    figures: dict[str, dict[str, list[float]]] = {s.name: {} for s in servers}
    spec: dict[str, dict[str, float]] = {}
    try:
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            targets = {s.name: Target(s.name, s.url, await s.ready(session)) for s in servers}
            for r in range(args.repeats):
                for name in args.scenarios:
                    order = servers if r % 2 == 0 else servers[::-1]
                    for s in order:
                        salt = f"[{name} {r} {time.time_ns()}] "  # never a cached prompt
                        before = await s.metrics(session)
                        value = await scenario(name, session, targets[s.name], args, salt)
                        after = await s.metrics(session)
                        figures[s.name].setdefault(name, []).append(value)
                        drafted = _delta(before, after, "spec_decode_num_draft_tokens_total")
                        if drafted:
                            got = spec.setdefault(f"{s.name}/{name}", {"drafted": 0.0,
                                                                       "accepted": 0.0})
                            got["drafted"] += drafted
                            got["accepted"] += _delta(
                                before, after, "spec_decode_num_accepted_tokens_total")
                        print(f"  repeat {r + 1} {name:6s} {s.name:16s} {value:8.1f} tok/s",
                              flush=True)
    finally:
        for s in servers:
            s.stop()
    return {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "servers": dict(args.servers),
            "figures": figures, "acceptance": spec}


def _delta(before: dict[str, float], after: dict[str, float], key: str) -> float:
    k = next((k for k in after if k.endswith(key)), None)
    return after.get(k, 0.0) - before.get(k, 0.0) if k else 0.0


def report(results: dict[str, Any], baseline: str) -> None:
    figures = results["figures"]
    names = list(figures)
    scenarios = list(next(iter(figures.values())))
    print(f"\nmedians over the repeats (tok/s), ratio to {baseline}:")
    print(f"{'scenario':8s} " + " ".join(f"{n:>24s}" for n in names))
    for sc in scenarios:
        base = statistics.median(figures[baseline][sc])
        cells = []
        for n in names:
            m = statistics.median(figures[n][sc])
            cells.append(f"{m:8.1f} ({m / base:4.2f}x)")
        print(f"{sc:8s} " + " ".join(f"{c:>24s}" for c in cells))
    for key, got in results["acceptance"].items():
        print(f"{key}: drafts accepted {got['accepted']:.0f} of {got['drafted']:.0f} "
              f"({got['accepted'] / got['drafted']:.0%})")


def default_servers(llama: str | None, gguf: str | None) -> list[tuple[str, str]]:
    serve = "{python} -m batchchat serve --port {port}"
    out = [("batchchat-off", serve + " --speculative off"),
           ("batchchat-ngram", serve + " --speculative ngram")]
    if llama and gguf:
        base = f"{llama} -m {gguf} -np 16 -c 65536 -t 2 --poll 0 --port {{port}}"
        out += [("llama", base), ("llama-ngram", base + " --spec-type ngram-simple")]
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.speculative", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--scenarios", default="code,story,chats,burst")
    p.add_argument("--llama-server", default=None, help="llama.cpp's llama-server binary")
    p.add_argument("--gguf", default=None, help="the GGUF both serve (default: the bundled one)")
    p.add_argument("--server", action="append", default=None, metavar="NAME=COMMAND",
                   help="instead of the default servers; COMMAND has {port} (and {python})")
    p.add_argument("--code-prompts", type=int, default=9)
    p.add_argument("--code-tokens", type=int, default=256)
    p.add_argument("--story-prompts", type=int, default=3)
    p.add_argument("--story-tokens", type=int, default=256)
    p.add_argument("--chat-tokens", type=int, default=128)
    p.add_argument("--burst-tokens", type=int, default=128)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--out", type=Path, default=None, help="write speculative.json here")
    args = p.parse_args(argv)
    args.scenarios = args.scenarios.split(",")
    if args.gguf is None:
        from engine.loader import bundled_model_path

        args.gguf = str(bundled_model_path())
    args.servers = ([tuple(s.split("=", 1)) for s in args.server] if args.server
                    else default_servers(args.llama_server, args.gguf))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = asyncio.run(run(args))
    report(results, args.servers[0][0])
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "speculative.json"
        path.write_text(json.dumps(results, indent=1))
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
