"""`python -m bench.serving`: the online-serving and multi-turn scenarios over HTTP,
against BatchChat's server (`batchchat serve`) and any other OpenAI-compatible server (e.g.
`mlx_lm.server` on the same weights), with one client and vLLM's metric definitions.

    python -m bench.serving \\
        --target batchchat=http://127.0.0.1:8000/v1 \\
        --target mlx_lm=http://127.0.0.1:8080/v1@/path/to/model --out bench-serving

A target is NAME=URL, or NAME=URL@MODEL when the server wants a model id other than the one
its GET /v1/models lists first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from app.simulator.workload import gamma_gaps, percentile, summarize

from .http_client import HttpResult, Target, chat
from .request_sampling import SAMPLING
from .scenarios import prompt_texts

FOLLOW_UPS = ["Go on.", "Now tell it from another character's view.", "Shorten it to three "
              "sentences.", "Give it a title and explain it.", "What happens next?"]


async def online(session: aiohttp.ClientSession, target: Target, texts: Sequence[str],
                 gaps: Iterator[float], num_requests: int, max_tokens: int,
                 sampling: dict[str, Any] | None = None) -> dict[str, Any]:
    """Requests sent at the given gaps (Poisson for vLLM's default), each a one-turn chat."""
    t0 = time.perf_counter()
    tasks = []
    results = []
    for i in range(num_requests):
        if i:
            await asyncio.sleep(next(gaps))
        result = HttpResult(index=i, prompt=texts[i % len(texts)])
        results.append(result)
        tasks.append(asyncio.create_task(chat(
            session, target, result, [{"role": "user", "content": result.prompt}],
            max_tokens, t0, sampling)))
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t0
    return summarize(results, wall) | {"per_request": [r.to_dict() for r in results]}


async def multi_turn(session: aiohttp.ClientSession, target: Target, texts: Sequence[str],
                     conversations: int, turns: int, max_tokens: int,
                     sampling: dict[str, Any] | None = None) -> dict[str, Any]:
    """`conversations` chats at once, each `turns` turns long; every turn resends the whole
    conversation (as a chat client does), so a server that keeps KV reuses the earlier
    turns: TTFT by turn and the cached prompt tokens it reports show it."""
    t0 = time.perf_counter()
    results: list[HttpResult] = []

    async def conversation(c: int) -> None:
        messages = [{"role": "user", "content": texts[c % len(texts)]}]
        for turn in range(turns):
            result = HttpResult(index=len(results), prompt=messages[-1]["content"], turn=turn)
            results.append(result)
            await chat(session, target, result, messages, max_tokens, t0, sampling)
            messages += [{"role": "assistant", "content": result.text},
                         {"role": "user", "content": FOLLOW_UPS[turn % len(FOLLOW_UPS)]}]

    await asyncio.gather(*(conversation(c) for c in range(conversations)))
    wall = time.perf_counter() - t0
    by_turn = []
    for turn in range(turns):
        rows = [r for r in results if r.turn == turn]
        cached = [r.cached_tokens for r in rows if r.cached_tokens is not None]
        by_turn.append(summarize(rows, wall) | {
            "turn": turn, "prompt_tokens_mean": sum(r.prompt_tokens for r in rows) / len(rows),
            "cached_tokens_mean": sum(cached) / len(cached) if cached else None})
    return summarize(results, wall) | {"by_turn": by_turn,
                                       "per_request": [r.to_dict() for r in results]}


async def head_of_line(session: aiohttp.ClientSession, target: Target, texts: Sequence[str],
                       long_text: str, streams: int, stream_tokens: int = 1024,
                       sampling: dict[str, Any] | None = None) -> dict[str, Any]:
    """`streams` chats decode; a long prompt arrives (after each stream's 5th token): its
    time to first token, and the streams' gaps between tokens while it was prefilled."""
    t0 = time.perf_counter()
    rows = [HttpResult(index=i, prompt=texts[i % len(texts)]) for i in range(streams)]
    tasks = [asyncio.create_task(chat(session, target, r, [{"role": "user", "content": r.prompt}],
                                      stream_tokens, t0, sampling)) for r in rows]
    while any(r.ttft_s is None or len(r.itl_s) < 4 for r in rows):
        if all(t.done() for t in tasks):
            raise RuntimeError(f"{target.name}: the streams ended before the long prompt")
        await asyncio.sleep(0.01)
    # never sent before: a prefix cache must not serve it (and a repeated run measures anew)
    long_text = f"[{target.name} {time.time_ns()}] {long_text}"
    long = HttpResult(index=streams, prompt=long_text)
    await chat(session, target, long, [{"role": "user", "content": long_text}], 4, t0, sampling)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if long.ttft_s is None:
        raise RuntimeError(f"{target.name}: the long prompt failed: {long.error}")
    start, first = long.send_t, long.send_t + long.ttft_s
    during = []
    for r in rows:  # each token's arrival, relative to t0, from its TTFT and gaps
        t = r.send_t + r.ttft_s
        for gap in r.itl_s:
            t += gap
            if t >= start and t - gap <= first:  # a gap that overlaps the prefill (a stall
                during.append(gap)  # across all of it, too)
    during.sort()
    return {"long_prompt_tokens": long.prompt_tokens, "long_ttft_s": long.ttft_s,
            "streams": streams, "gaps_during": len(during),
            "itl_during_median_s": statistics.median(during) if during else None,
            "itl_during_p99_s": percentile(during, 99) if during else None,
            "itl_during_max_s": during[-1] if during else None}


async def one_stream(session: aiohttp.ClientSession, target: Target, texts: Sequence[str],
                     requests: int, max_tokens: int, sampling: dict[str, Any] | None = None,
                     ) -> dict[str, Any]:
    """One request at a time: each one's decode rate, (output tokens - 1) / (E2E - TTFT)."""
    t0 = time.perf_counter()
    rows = []
    for i in range(requests):
        r = HttpResult(index=i, prompt=texts[i % len(texts)])
        await chat(session, target, r, [{"role": "user", "content": r.prompt}], max_tokens, t0,
                   sampling)
        if r.error or r.ttft_s is None or r.output_tokens < 2:
            raise RuntimeError(f"{target.name}: a one-stream request failed: {r.error}")
        rows.append(r)
    rates = [(r.output_tokens - 1) / (r.e2e_s - r.ttft_s) for r in rows]
    return {"decode_tps": rates, "decode_tps_median": statistics.median(rates),
            "output_tokens": [r.output_tokens for r in rows]}


def physical_floor(weights: Path, nbytes: int | None = None) -> dict[str, float]:
    """The one-stream ceiling of this machine for these weights: a decode step reads every
    weight once (or `nbytes`, what one token reads: a MoE's routed experts only), so no
    server decodes faster than bandwidth / weight bytes (the bandwidth measured now, as
    bench does)."""
    from .physical import memory_bandwidth_gbs

    nbytes = nbytes or weights.stat().st_size
    bandwidth = memory_bandwidth_gbs()
    return {"weight_bytes": nbytes, "bandwidth_gbs": bandwidth,
            "floor_tps": bandwidth * 1e9 / nbytes}


async def run(targets: Sequence[Target], args: argparse.Namespace) -> dict[str, Any]:
    # --fresh: a tag at the front of every prompt that no earlier run sent, so a server's
    # prompt cache cannot serve it (without it, a repeated run measures cached prompts)
    tag = f"[run {time.time_ns()}] " if args.fresh else ""
    texts = [tag + t for t in prompt_texts(16)]
    # The conversations start from prompts the online scenario never sent, so their first
    # turn is cold on a server that caches prefixes.
    chats = prompt_texts(16 + args.conversations)[16:]
    out: dict[str, Any] = {"when": time.strftime("%Y-%m-%d %H:%M:%S"),
                           "args": {k: str(v) for k, v in vars(args).items()}, "targets": {}}
    timeout = aiohttp.ClientTimeout(total=None, sock_read=args.timeout)
    # one connection per request in flight, as vLLM's client; a new one for each request
    # (llama.cpp's server closed reused keep-alive connections mid multi-turn chat:
    # "Can not write request body")
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        for target in targets:  # one after another: they may share the machine
            target = await _resolve_model(session, target)
            res: dict[str, Any] = {"model": target.model, "url": target.url}
            scen = set(args.scenarios.split(","))
            if "online" in scen:
                res["online"] = await online(
                    session, target, texts, gamma_gaps(args.rate, args.burstiness, args.seed),
                    args.requests, args.new_tokens, SAMPLING[args.sampling])
            if "multiturn" in scen:
                res["multiturn"] = await multi_turn(session, target, chats,
                                                    args.conversations, args.turns,
                                                    args.new_tokens, SAMPLING[args.sampling])
            if "solo" in scen:
                res["solo"] = await one_stream(session, target, texts, args.solo_requests,
                                               args.solo_tokens, SAMPLING[args.sampling])
            if "hol" in scen:
                long_text = (" ".join(prompt_texts(16, 1)) * 4)[: args.long_chars]
                res["hol"] = await head_of_line(session, target, texts, long_text,
                                                args.hol_streams,
                                                sampling=SAMPLING[args.sampling])
            out["targets"][target.name] = res
    if "solo" in set(args.scenarios.split(",")) and args.weights is not None:
        out["floor"] = physical_floor(args.weights)
    return out


async def _resolve_model(session: aiohttp.ClientSession, target: Target) -> Target:
    if target.model:
        return target
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    async with session.get(f"{target.url}/models", headers=headers) as r:
        r.raise_for_status()
        models = (await r.json())["data"]
    return Target(target.name, target.url, models[0]["id"], target.api_key)


def _print_solo(results: dict[str, Any]) -> None:
    rows = [(n, t["solo"]) for n, t in results["targets"].items() if "solo" in t]
    if not rows:
        return
    floor = results.get("floor")
    print("\n== one stream over HTTP: decode tok/s, one request at a time")
    if floor:
        print(f"physical floor: {floor['weight_bytes'] / 1e6:.0f} MB of weights read a token at "
              f"{floor['bandwidth_gbs']:.1f} GB/s (measured now) = {floor['floor_tps']:.0f} tok/s")
    for name, r in rows:
        runs = ", ".join(f"{v:.1f}" for v in r["decode_tps"])
        share = f"  {r['decode_tps_median'] / floor['floor_tps'] * 100:.0f}% of the floor" \
            if floor else ""
        print(f"{name:<16}median {r['decode_tps_median']:7.1f}  ({runs}){share}")


def _print_hol(results: dict[str, Any]) -> None:
    rows = [(n, t["hol"]) for n, t in results["targets"].items() if "hol" in t]
    if not rows:
        return
    print("\n== head of line over HTTP: streams decode, a long prompt arrives")
    print(f"{'target':<16}{'prompt tok':>11}{'its TTFT s':>11}{'gaps':>6}"
          f"{'ITL med':>9}{'ITL p99':>9}{'ITL max':>9}  (ms, the streams' gaps meanwhile)")
    for name, h in rows:
        gaps = "".join(f"{'-':>9}" if h[k] is None else f"{h[k] * 1e3:9.0f}"
                       for k in ("itl_during_median_s", "itl_during_p99_s", "itl_during_max_s"))
        print(f"{name:<16}{h['long_prompt_tokens']:>11}{h['long_ttft_s']:>11.2f}"
              f"{h['gaps_during']:>6}{gaps}")


def parse_target(spec: str, api_key: str | None) -> Target:
    name, sep, rest = spec.partition("=")
    if not sep or not rest:
        raise argparse.ArgumentTypeError(f"--target wants NAME=URL[@MODEL], got {spec!r}")
    url, _, model = rest.partition("@")
    return Target(name, url.rstrip("/"), model, api_key)


def print_table(results: dict[str, Any]) -> None:
    def ms(d: dict[str, float], key: str) -> str:
        return f"{d[key] * 1e3:8.0f}"

    for scenario in ("online", "multiturn"):
        rows = [(n, t[scenario]) for n, t in results["targets"].items() if scenario in t]
        if not rows:
            continue
        print(f"\n== {scenario} over HTTP (ms; vLLM's definitions)")
        print(f"{'target':<16}{'done':>6}{'out tok/s':>10}{'TTFT med':>9}{'TTFT p99':>9}"
              f"{'TPOT med':>9}{'ITL med':>9}{'ITL p99':>9}{'E2E med':>9}")
        for name, r in rows:
            print(f"{name:<16}{r['completed']:>6}{r['output_throughput']:>10.1f}"
                  f"{ms(r['ttft_s'], 'median')} {ms(r['ttft_s'], 'p99')}"
                  f"{ms(r['tpot_s'], 'median')} {ms(r['itl_s'], 'median')}"
                  f"{ms(r['itl_s'], 'p99')} {ms(r['e2e_s'], 'median')}")
        for name, r in rows:
            for t in r.get("by_turn", ()):
                cached = t["cached_tokens_mean"]
                print(f"  {name} turn {t['turn'] + 1}: prompt {t['prompt_tokens_mean']:.0f} "
                      f"tokens, cached {'n/a' if cached is None else f'{cached:.0f}'}, "
                      f"TTFT median {t['ttft_s']['median'] * 1e3:.0f} ms")
    _print_solo(results)
    _print_hol(results)


def _bundled_weights() -> Path | None:
    from engine.loader.bundled import BUNDLED_FILENAME, model_cache_dir

    path = model_cache_dir() / BUNDLED_FILENAME
    return path if path.is_file() else None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.serving", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", action="append", required=True, metavar="NAME=URL[@MODEL]")
    p.add_argument("--api-key", default=None, help="sent to every target")
    p.add_argument("--scenarios", default="online,multiturn", help="of online,multiturn,solo,hol")
    p.add_argument("--requests", type=int, default=32, help="online: requests sent")
    p.add_argument("--rate", type=float, default=0.5, help="online: requests per second")
    p.add_argument("--burstiness", type=float, default=1.0, help="online: 1 = Poisson")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fresh", action="store_true",
                   help="online: prompts no earlier run sent (no prompt-cache hits)")
    p.add_argument("--conversations", type=int, default=4, help="multi-turn: chats at once")
    p.add_argument("--turns", type=int, default=4, help="multi-turn: turns per chat")
    p.add_argument("--solo-requests", type=int, default=3, help="solo: requests, one at a time")
    p.add_argument("--solo-tokens", type=int, default=256, help="solo: max tokens of each")
    p.add_argument("--weights", type=Path, default=_bundled_weights(),
                   help="solo: the weights file the targets serve, for the physical floor "
                        "(default: the bundled GGUF, when downloaded)")
    p.add_argument("--hol-streams", type=int, default=8, help="hol: streams decoding")
    p.add_argument("--long-chars", type=int, default=9000,
                   help="hol: characters of the long prompt (~2,000 tokens for SmolLM2)")
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--sampling", choices=sorted(SAMPLING), default="tabs",
                   help="tabs: the chat tabs' defaults (temperature 0.7, top-p 0.95, min-p "
                        "0.05, repetition penalty 1.1), what users run; greedy: temperature 0")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds without a byte")
    p.add_argument("--out", type=Path, default=None, help="write serving.json here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    targets = [parse_target(t, args.api_key) for t in args.target]
    results = asyncio.run(run(targets, args))
    print_table(results)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "serving.json"
        path.write_text(json.dumps(results, indent=1))
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
