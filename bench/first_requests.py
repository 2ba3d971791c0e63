"""`python -m bench.first_requests GGUF`: the first requests after a server's load, one
at a time, each one's first token, decode rate and its long gaps (issue #48: BatchChat's
first request after the load was the slowest in every ladder cell).

    python -m bench.first_requests MODEL.gguf [--requests 6] [--tokens 128] [--pause 0]
        [--server 'CMD with {port}'] [--gap-ms 60]

By default the server is BatchChat's `serve` on the file. Each request is a prompt never
sent before, with the tabs' sampling; `--pause` waits that many seconds between requests
(BatchChat gives memory back after 2 s idle: engine/worker.py). Prints the seconds from the
server's start to its first answer (the load), then, per request: TTFT,
decode tok/s ((tokens - 1) / (E2E - TTFT)) and the inter-token gaps over --gap-ms, with
the token index each one preceded.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import aiohttp

from .http_client import HttpResult, Target, chat
from .request_sampling import TABS
from .scenarios import prompt_texts
from .speculative import Server


async def run(args: argparse.Namespace) -> list[dict]:
    command = (args.server
               or f"{sys.executable} -m batchchat serve --model {args.gguf} --port {{port}}")
    server = Server("first", command)
    t = time.perf_counter()
    server.start()
    rows = []
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
            model = await server.ready(session)
            print({"ready_s": round(time.perf_counter() - t, 2)}, flush=True)
            target = Target("first", server.url, model)
            texts = prompt_texts(args.requests)
            for i, text in enumerate(texts):
                if i and args.pause:
                    await asyncio.sleep(args.pause)
                r = HttpResult(index=i, prompt=f"[first {time.time_ns()}] {text}")
                await chat(session, target, r, [{"role": "user", "content": r.prompt}],
                           args.tokens, time.perf_counter(), TABS)
                if r.error or r.ttft_s is None or r.output_tokens < 2:
                    raise RuntimeError(f"request {i} failed: {r.error}")
                gaps = [(k + 1, round(g * 1000)) for k, g in enumerate(r.itl_s)
                        if g * 1000 > args.gap_ms]
                row = {"request": i, "ttft_s": round(r.ttft_s, 3),
                       "decode_tps": round((r.output_tokens - 1) / (r.e2e_s - r.ttft_s), 1),
                       "tokens": r.output_tokens, "gaps_ms": gaps}
                print(row, flush=True)
                rows.append(row)
    finally:
        server.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("gguf")
    p.add_argument("--requests", type=int, default=6)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--pause", type=float, default=0.0)
    p.add_argument("--gap-ms", type=float, default=60.0)
    p.add_argument("--server", default=None, help="a server command with {port} in it")
    asyncio.run(run(p.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
