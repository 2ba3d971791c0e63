"""`python -m bench.model_ladder`: BatchChat's `serve` against llama-server on the model
ladder's GGUFs (issue #48), over HTTP with one client.

    python -m bench.model_ladder --models /work/ladder --llama-server BIN/llama-server \\
        [--cells 'llama-135m-Q4_K_M,*-1.5b-Q4_K_M'] [--out DIR]

The models are ARCH-SIZE-TYPE.gguf files under --models (bench/ladder_models.py makes them);
--cells keeps those whose ARCH-SIZE-TYPE matches one of its shell patterns. Smallest first.
For each cell both servers are started on the same file and loaded before the first request
(each idle while the other is measured); each scenario runs once on each, the order
alternated from scenario to scenario and from cell to cell so that drift on a shared machine
falls on both alike:

- solo: one stream, --solo-requests requests one after another on each server, their
  requests taken in turn (B L L B ...), --solo-tokens each, the tabs' sampling: decode
  tok/s ((tokens - 1) / (E2E - TTFT)), median; and its share of the physical floor, the
  machine's memory bandwidth (measured in this cell, bench/physical.py) over the bytes of
  weights a token reads (the file's size: the head reads the whole embedding-sized matrix
  each token; a MoE's experts counted at `expert_used_count` of
  `expert_count`, the share one token is routed to);
- burst: --burst requests at once, --burst-tokens each, the tabs' sampling: output tok/s,
  TTFT p50 and ITL p99;
- long: one prompt of --long-tokens tokens (counted by llama-server's /tokenize), never sent
  before: its time to first token.

Random weights give random text; a request that ends before max_tokens (an EOS drawn) is
counted in the table's `short` column, so a cell whose figures rest on fewer tokens shows it.
Prints a table with BatchChat / llama-server ratios and whether the issue's targets are met
(throughput >= 1.0x, ITL p99 <= llama-server's, one stream >= 50 % of the floor at 1.5B).
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from .http_client import HttpResult, Target, chat
from .ladder_models import ARCHS, SIZES, TYPES
from .request_sampling import TABS
from .scenarios import prompt_texts
from .serving import one_stream, online, physical_floor
from .speculative import Server

NAME = re.compile(r"^(?P<arch>[a-z0-9]+)-(?P<size>[0-9.]+[mb])-(?P<type>[A-Z0-9_]+)\.gguf$")
SERVERS = ("batchchat", "llama")


def find_cells(models: Path, patterns: str | None) -> list[tuple[str, Path]]:
    """(ARCH-SIZE-TYPE, file) of the ladder's GGUFs under `models` that match `patterns`,
    smallest size first, then by type and architecture."""
    found = []
    for path in models.glob("*.gguf"):
        m = NAME.match(path.name)
        if not m or m["arch"] not in ARCHS or m["size"] not in SIZES:
            continue
        cell = path.name.removesuffix(".gguf")
        if patterns and not any(fnmatch.fnmatchcase(cell, p) for p in patterns.split(",")):
            continue
        order = (list(SIZES).index(m["size"]),
                 TYPES.index(m["type"]) if m["type"] in TYPES else len(TYPES),
                 list(ARCHS).index(m["arch"]))
        found.append((order, cell, path))
    return [(cell, path) for _, cell, path in sorted(found)]


def token_bytes(gguf: Path) -> int:
    """The bytes of weights one decoded token reads: the whole file but for a MoE's experts,
    of which only `expert_used_count` of `expert_count` (the tensors named *_exps)."""
    from gguf import GGUFReader

    reader = GGUFReader(gguf)
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()

    def meta(key: str) -> int | None:
        field = reader.fields.get(f"{arch}.{key}")
        return int(field.parts[-1][0]) if field is not None else None

    count, used = meta("expert_count"), meta("expert_used_count")
    experts = sum(int(t.n_bytes) for t in reader.tensors if t.name.endswith("_exps.weight"))
    if not count or not used or not experts:
        return gguf.stat().st_size
    return gguf.stat().st_size - experts + experts * used // count


def server_commands(args: argparse.Namespace, gguf: Path) -> dict[str, str]:
    python = sys.executable
    return {
        "batchchat": f"{python} -m batchchat serve --model {gguf} --port {{port}} "
                     f"{args.batchchat_args}".strip(),
        # 16 slots for the burst; one KV pool for all (-kvu: with -np given it is off, and a
        # slot would get ctx / 16 tokens), so one slot may take the long prompt
        "llama": f"{args.llama_server} -m {gguf} -np {args.burst} -c {args.llama_ctx} -kvu "
                 f"-t 2 --poll 0 --port {{port}} {args.llama_args}".strip()}


def resident_mib(server: Server) -> float | None:
    """The server process's resident memory (VmRSS)."""
    try:
        status = Path(f"/proc/{server.proc.pid}/status").read_text()
    except (OSError, AttributeError):
        return None
    m = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(m.group(1)) / 1024 if m else None


async def long_text(session: aiohttp.ClientSession, llama_url: str, tokens: int) -> str:
    """Prose of about `tokens` tokens, counted by llama-server's tokenizer."""
    base = " ".join(prompt_texts(16, 1))
    async with session.post(llama_url.removesuffix("/v1") + "/tokenize",
                            json={"content": base}) as r:
        per = len((await r.json())["tokens"])
    return (base + " ") * (tokens // per) + base[: int(len(base) * (tokens % per) / per)]


async def first_token(session: aiohttp.ClientSession, target: Target, text: str) -> dict:
    text = f"[{target.name} {time.time_ns()}] {text}"  # never a cached prefix
    r = HttpResult(index=0, prompt=text)
    await chat(session, target, r, [{"role": "user", "content": text}], 2,
               time.perf_counter(), TABS)
    if r.ttft_s is None:
        raise RuntimeError(f"{target.name}: the long prompt failed: {r.error}")
    return {"ttft_s": r.ttft_s, "prompt_tokens": r.prompt_tokens}


async def solo(session: aiohttp.ClientSession, targets: dict[str, Target],
               args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """One stream on each server, their requests taken in turn (B L L B B L ...: the first
    of each pair alternates), so that a shared host's drift over the minutes of a cell falls
    on both alike; one run each of many requests put the same cell at 0.85x and at 1.20x."""
    texts = prompt_texts(args.solo_requests)
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in targets}
    for i, text in enumerate(texts):
        order = list(targets) if i % 2 == 0 else list(targets)[::-1]
        for name in order:
            salted = f"[solo {name} {time.time_ns()}] {text}"
            runs[name].append(await one_stream(session, targets[name], [salted], 1,
                                               args.solo_tokens, TABS))
    out = {}
    for name, rs in runs.items():
        rates = [r["decode_tps"][0] for r in rs]
        out[name] = {"tps": statistics.median(rates), "runs": rates,
                     "short": sum(r["output_tokens"][0] < args.solo_tokens for r in rs)}
    return out


async def scenario(name: str, session: aiohttp.ClientSession, targets: dict[str, Target],
                   args: argparse.Namespace, long_prompt: str) -> dict[str, dict[str, Any]]:
    """One scenario on every server, in the order of `targets`; a server that fails gets
    {"error": ...} (the table shows '-') and the rest of the cell runs."""
    failures = (TimeoutError, RuntimeError, aiohttp.ClientError)
    if name == "solo":  # its requests alternate between the servers, so it runs them together
        try:
            return await solo(session, targets, args)
        except failures as e:
            return {n: {"error": str(e)[:300]} for n in targets}
    out = {}
    for server, target in targets.items():
        try:
            out[server] = await one_scenario(name, session, target, args, long_prompt)
        except failures as e:
            out[server] = {"error": str(e)[:300]}
    return out


async def one_scenario(name: str, session: aiohttp.ClientSession, target: Target,
                       args: argparse.Namespace, long_prompt: str) -> dict[str, Any]:
    salt = f"[{name} {target.name} {time.time_ns()}] "
    if name == "burst":
        texts = [salt + t for t in prompt_texts(args.burst)]
        res = await online(session, target, texts, iter(lambda: 0.0, None), args.burst,
                           args.burst_tokens, TABS)
        rows = res["per_request"]
        return {"tps": res["output_throughput"], "ttft_p50_s": res["ttft_s"]["median"],
                "itl_p99_s": res["itl_s"]["p99"], "completed": res["completed"],
                "short": sum(r["output_tokens"] < args.burst_tokens for r in rows)}
    if name == "long":
        return await first_token(session, target, long_prompt)
    raise ValueError(name)


async def calm(max_load: float | None, max_wait_s: float) -> None:
    """Wait (at most `max_wait_s`) for the shared machine's 1-minute load to fall below
    `max_load`: llama-server's threads wait for each other at every op, so it slows far
    more than BatchChat when other work takes the cores."""
    t = time.perf_counter()
    while max_load is not None and os.getloadavg()[0] > max_load \
            and time.perf_counter() - t < max_wait_s:
        await asyncio.sleep(5)


async def run_cell(index: int, cell: str, gguf: Path, args: argparse.Namespace,
                   session: aiohttp.ClientSession) -> dict[str, Any]:
    await calm(args.max_load, args.max_wait)
    servers = {n: Server(n, c) for n, c in server_commands(args, gguf).items()}
    for s in servers.values():
        s.log = Path(f"/tmp/bench-ladder-{s.name}.log")
        s.start()
    out: dict[str, Any] = {"cell": cell, "file_bytes": gguf.stat().st_size,
                           "when": time.strftime("%Y-%m-%d %H:%M:%S"),
                           "load_before": os.getloadavg()[0]}
    try:
        targets = {n: Target(n, s.url, await s.ready(session)) for n, s in servers.items()}
        prompt = await long_text(session, servers["llama"].url, args.long_tokens)
        out["floor"] = physical_floor(gguf, token_bytes(gguf))
        for k, name in enumerate(args.scenarios):
            order = list(SERVERS) if (index + k) % 2 == 0 else list(SERVERS)[::-1]
            both = await scenario(name, session, {n: targets[n] for n in order}, args, prompt)
            for server in order:
                out.setdefault(server, {})[name] = both[server]
                print(f"  {cell} {name:5s} {server:9s} {json.dumps(_short(both[server]))}",
                      flush=True)
        for n, s in servers.items():
            out[n]["rss_mib"] = resident_mib(s)
        out["load_after"] = os.getloadavg()[0]  # the machine is shared: how busy it was
    finally:
        for s in servers.values():
            s.stop()
    return out


def _short(res: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in res.items() if k != "runs"}


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:5.2f}x" if a and b else "    -"


def targets_met(row: dict[str, Any]) -> list[str]:
    """The issue's targets this cell misses (empty: all met)."""
    def get(side: str, name: str, key: str) -> float | None:
        return row[side].get(name, {}).get(key)

    miss = []
    for name in ("solo", "burst"):
        ours, theirs = get("batchchat", name, "tps"), get("llama", name, "tps")
        if ours is None and name in row["batchchat"]:
            miss.append(f"{name} failed")
        elif ours is not None and theirs is not None and ours < theirs:
            miss.append(f"{name} tok/s")
    ours, theirs = get("batchchat", "burst", "itl_p99_s"), get("llama", "burst", "itl_p99_s")
    if ours is not None and theirs is not None and ours > theirs:
        miss.append("ITL p99")
    solo = get("batchchat", "solo", "tps")
    if solo is not None and "-1.5b-" in row["cell"] and solo < 0.5 * row["floor"]["floor_tps"]:
        miss.append("50% of floor")
    return miss


def print_table(rows: list[dict[str, Any]]) -> None:
    """One line per cell: BatchChat (B) and llama-server (L), and B / L."""
    print("\nB = BatchChat serve, L = llama-server (same GGUF, same client); ratio = B / L"
          " (for times, lower is better)")
    head = (f"{'cell':<20}{'MB':>5}{'floor':>6} | {'solo B':>7}{'L':>7}{'B/L':>7}"
            f"{'%fl B':>6}{'L':>4} | {'burst B':>8}{'L':>7}{'B/L':>7} | {'TTFT50 B':>9}"
            f"{'L':>7} | {'ITL99 B':>8}{'L':>6} | {'8k TTFT B':>10}{'L':>7}{'B/L':>7} |"
            f"{'RSS B':>6}{'L':>6} | short | load | misses")
    print(head)
    print("-" * len(head))
    for row in rows:
        b, ll = row["batchchat"], row["llama"]
        floor = row["floor"]["floor_tps"]

        def get(side: dict[str, Any], name: str, key: str) -> float | None:
            return side.get(name, {}).get(key)

        def num(v: float | None, width: int, scale: float = 1.0, fmt: str = ".1f") -> str:
            return f"{v * scale:{width}{fmt}}" if v is not None else f"{'-':>{width}}"

        sb, sl = get(b, "solo", "tps"), get(ll, "solo", "tps")
        bb, bl = get(b, "burst", "tps"), get(ll, "burst", "tps")
        lb, lt = get(b, "long", "ttft_s"), get(ll, "long", "ttft_s")
        short = sum(side.get(n, {}).get("short", 0) for side in (b, ll)
                    for n in ("solo", "burst"))
        print(f"{row['cell']:<20}{row['file_bytes'] / 1e6:5.0f}{floor:6.0f} | "
              f"{num(sb, 7)}{num(sl, 7)}{_ratio(sb, sl):>7}"
              f"{num(sb and sb / floor, 5, 100, '.0f')}%{num(sl and sl / floor, 3, 100, '.0f')}%"
              f" | {num(bb, 8)}{num(bl, 7)}{_ratio(bb, bl):>7} | "
              f"{num(get(b, 'burst', 'ttft_p50_s'), 9, 1, '.1f')}"
              f"{num(get(ll, 'burst', 'ttft_p50_s'), 7, 1, '.1f')} | "
              f"{num(get(b, 'burst', 'itl_p99_s'), 8, 1e3, '.0f')}"
              f"{num(get(ll, 'burst', 'itl_p99_s'), 6, 1e3, '.0f')} | "
              f"{num(lb, 10, 1, '.2f')}{num(lt, 7, 1, '.2f')}{_ratio(lb, lt):>7} |"
              f"{num(b.get('rss_mib'), 6, 1, '.0f')}{num(ll.get('rss_mib'), 6, 1, '.0f')} | "
              f"{short:5d} | {row['load_before']:4.1f} | {', '.join(targets_met(row)) or 'none'}")
    print("floor: tok/s at the measured memory bandwidth over the bytes a token reads; the "
          "burst's TTFT50 in s and ITL99 in ms; 8k TTFT in s; RSS in MiB after the cell; load: the "
          "1-minute load average when the cell began (2 cores)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.model_ladder", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", type=Path, required=True, help="the ladder's GGUF directory")
    p.add_argument("--llama-server", required=True, help="llama.cpp's llama-server binary")
    p.add_argument("--cells", default=None, help="ARCH-SIZE-TYPE shell patterns, comma-separated")
    p.add_argument("--scenarios", default="solo,burst,long")
    p.add_argument("--solo-requests", type=int, default=3)
    p.add_argument("--solo-tokens", type=int, default=128)
    p.add_argument("--burst", type=int, default=16)
    p.add_argument("--burst-tokens", type=int, default=128)
    p.add_argument("--long-tokens", type=int, default=8000)
    p.add_argument("--llama-ctx", type=int, default=32768)
    p.add_argument("--batchchat-args", default="", help="more `batchchat serve` options")
    p.add_argument("--llama-args", default="", help="more llama-server options")
    p.add_argument("--max-load", type=float, default=None,
                   help="before each cell, wait for the 1-minute load average below this")
    p.add_argument("--max-wait", type=float, default=300.0, help="... for at most these seconds")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds without a byte")
    p.add_argument("--out", type=Path, default=None, help="write model_ladder.json here")
    args = p.parse_args(argv)
    args.scenarios = args.scenarios.split(",")
    unknown = set(args.scenarios) - {"solo", "burst", "long"}
    if unknown:
        p.error(f"unknown scenarios {sorted(unknown)}")
    return args


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    cells = find_cells(args.models, args.cells)
    if not cells:
        raise SystemExit(f"no ladder GGUF under {args.models} matches {args.cells!r}")
    timeout = aiohttp.ClientTimeout(total=None, sock_read=args.timeout)
    rows = []
    async with aiohttp.ClientSession(
            timeout=timeout, connector=aiohttp.TCPConnector(limit=0, force_close=True)) as s:
        for i, (cell, path) in enumerate(cells):
            print(f"{cell} ({path})", flush=True)
            rows.append(await run_cell(i, cell, path, args, s))
            if args.out is not None:  # kept as it goes: a long run may be cut short
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / "model_ladder.json").write_text(json.dumps(rows, indent=1))
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = asyncio.run(run(args))
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
