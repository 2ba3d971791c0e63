"""Four answers to one long prompt: one `n = 4` request against four requests sent at once.

    python -m bench.n_answers [--model bundled] [--prompt-words 440] [--max-tokens 48]
                              [--repeats 3] [--n 4]

Through the real server (app/server) on loopback, in this process. Each trial runs both
ways, alternated, each on a prompt of its own (a new first line: neither reuses the other's
KV; the chat template's first tokens are shared), with seeds s + i for answer i; it reports
the time until the last answer is complete, the prompt tokens the engine computed (its own
counter), the first token of any answer and the tokens generated (answers may end early).
Medians over the trials.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from typing import Any

from engine.preload import ensure_preloads

WORDS = ("the river runs past an old mill where the miller keeps a ledger of every sack of "
         "grain brought in from the hills and every coin paid out to the carters").split()


def messages(trial: int, words: int) -> list[dict[str, str]]:
    text = " ".join(WORDS[i % len(WORDS)] for i in range(words))
    return [{"role": "system", "content": f"Trial {trial}. You summarise notes."},
            {"role": "user", "content": f"Notes: {text}\nSummarise these notes."}]


async def main(args: argparse.Namespace) -> None:
    import aiohttp

    from app.backend.local_target import LocalTarget, load_target
    from app.server import ApiServer, ServerConfig

    target: LocalTarget = load_target(args.model)
    await target.start()
    server = ApiServer(lambda: target, lambda: "m", ServerConfig(port=0))
    url = await server.start() + "/v1/chat/completions"
    rows: dict[str, list[tuple[float, int, float]]] = {"n": [], "separate": []}
    try:
        async with aiohttp.ClientSession() as http:
            async def post(body: dict[str, Any]) -> dict[str, Any]:
                async with http.post(url, json=body) as r:
                    assert r.status == 200, await r.text()
                    return await r.json()

            async def run(way: str, trial: int) -> tuple[float, int, int, int, float]:
                prompt_id = 2 * trial + (way == "separate")
                base = {"model": "m", "messages": messages(prompt_id, args.prompt_words),
                        "max_tokens": args.max_tokens, "temperature": 0.7}
                before = target.stats().total_prompt_tokens
                t0 = time.perf_counter()
                if way == "n":
                    r = await post(base | {"n": args.n, "seed": 100 * trial})
                    assert len(r["choices"]) == args.n
                    usage = r["usage"]
                    prompt, made = usage["prompt_tokens"], usage["completion_tokens"]
                else:
                    rs = await asyncio.gather(*(post(base | {"seed": 100 * trial + i})
                                                for i in range(args.n)))
                    prompt = rs[0]["usage"]["prompt_tokens"]
                    made = sum(r["usage"]["completion_tokens"] for r in rs)
                took = time.perf_counter() - t0
                first = min(f.ttft_s or took for f in target.finished_requests()[-args.n:])
                return took, target.stats().total_prompt_tokens - before, prompt, made, first

            await run("n", 0)  # warm-up: first passes of each shape
            for trial in range(1, args.repeats + 1):
                for way in (("n", "separate") if trial % 2 else ("separate", "n")):
                    took, computed, prompt, made, first = await run(way, trial)
                    rows[way].append((took, computed, first))
                    print(f"trial {trial} {way:8s} prompt {prompt} tokens: first token after "
                          f"{first:.2f} s, last answer after {took:.2f} s, prompt tokens "
                          f"computed {computed}, generated {made}", flush=True)
    finally:
        await server.stop()
        await target.shutdown()
    med = {way: [statistics.median(row[k] for row in r) for k in range(3)]
           for way, r in rows.items()}
    print(f"\n{target.description}, {args.n} answers, medians of {args.repeats}:")
    for way, label in (("n", f"one n={args.n} request"), ("separate", f"{args.n} separate")):
        took, computed, first = med[way]
        print(f"  {label:17s}: first token {first:.2f} s, last answer {took:.2f} s, "
              f"prompt tokens computed {computed:.0f}")
    print(f"  ratio separate / n: time {med['separate'][0] / med['n'][0]:.2f}x, "
          f"prompt tokens {med['separate'][1] / med['n'][1]:.2f}x")


if __name__ == "__main__":
    ensure_preloads()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="bundled")
    p.add_argument("--prompt-words", type=int, default=440)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--n", type=int, default=4)
    asyncio.run(main(p.parse_args()))
    sys.stdout.flush()
    os._exit(0)  # MLX's static destructors can abort after worker-thread use (mlx#3126)
