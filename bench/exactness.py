"""Does the engine answer as mlx-lm does on this device, alone and in a batch?

    python -m bench.exactness [--model bundled] [--requests 8] [--new-tokens 64]

For each prompt, greedy: mlx-lm's `stream_generate` (the reference), the engine with the
request alone, and the engine with all requests at once (against mlx-lm and against the
request alone). Seeded (the tabs' sampling, one seed per request): the engine alone and in
the batch, and several answers to one prompt sharing its prefill (`share_prompt_with`)
against each alone. Prints, per prompt, where each answer
first leaves its reference (`=` when it never does) and a count of identical answers.

The same-answer tests check this with tiny models on the CPU; this is for a real model on
the device at hand (Metal, CUDA), where MLX's own kernels run instead of engine/native.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from engine.preload import ensure_preloads


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first index where the two differ (a length difference counts), None if equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


async def compare(loaded: Any, requests: int, new_tokens: int) -> dict[str, list[int | None]]:
    from mlx_lm import stream_generate

    from . import scenarios
    from .request_sampling import request_sampling

    engine = scenarios.make_engine(loaded, requests + 1)
    await engine.start()
    try:
        prompts = [scenarios.chat_tokens(engine, t) for t in scenarios.prompt_texts(requests)]
        greedy, tabs = request_sampling("greedy"), request_sampling("tabs")

        async def run(batch: list[list[int]], sampling: Any, seeds: list[int | None],
                      shared: bool = False) -> list[list[int]]:
            streams = []
            for p, seed in zip(batch, seeds, strict=True):
                lead = streams[0].request_id if shared and streams else None
                streams.append(engine.submit(prompt_tokens=p, share_prompt_with=lead,
                                             params=sampling.params(new_tokens, seed)))
            await asyncio.gather(*(s.result() for s in streams))
            return [list(s.tokens) for s in streams]

        reference = [[r.token for r in stream_generate(engine.model, engine.tokenizer, p,
                                                       max_tokens=new_tokens)]
                     for p in prompts]
        # stream_generate yields the eos token it stops on; the engine does not emit it.
        eos = set(loaded.eos_token_ids)
        reference = [r[:-1] if r and r[-1] in eos else r for r in reference]
        nones: list[int | None] = [None] * requests
        seeds: list[int | None] = list(range(1000, 1000 + requests))
        alone = [(await run([p], greedy, [None]))[0] for p in prompts]
        together = await run(prompts, greedy, nones)
        seeded_alone = [(await run([p], tabs, [s]))[0] for p, s in zip(prompts, seeds,
                                                                        strict=True)]
        seeded_together = await run(prompts, tabs, seeds)
        # several answers to the first prompt (the API's n, the tabs' N answers): prefilled
        # once, the others restored from its cached prompt, each as its seed answers alone
        shared = await run([prompts[0]] * requests, tabs, seeds, shared=True)
        shared_alone = [seeded_alone[0]] + [(await run([prompts[0]], tabs, [s]))[0]
                                            for s in seeds[1:]]
    finally:
        await engine.shutdown()
    return {
        "greedy alone vs mlx-lm": [first_difference(a, r) for a, r in zip(alone, reference,
                                                                         strict=True)],
        "greedy batched vs mlx-lm": [first_difference(a, r)
                                     for a, r in zip(together, reference, strict=True)],
        "greedy batched vs alone": [first_difference(a, r)
                                    for a, r in zip(together, alone, strict=True)],
        "seeded batched vs alone": [first_difference(a, r)
                                    for a, r in zip(seeded_together, seeded_alone, strict=True)],
        "seeded shared vs alone": [first_difference(a, r)
                                   for a, r in zip(shared, shared_alone, strict=True)],
    }


def main(argv: list[str] | None = None) -> int:
    ensure_preloads()
    p = argparse.ArgumentParser(prog="python -m bench.exactness", description=__doc__)
    p.add_argument("--model", default="bundled")
    p.add_argument("--requests", type=int, default=8)
    p.add_argument("--new-tokens", type=int, default=64)
    args = p.parse_args(argv)
    from engine.loader import load_model

    from .physical import device_description

    loaded = load_model(args.model)
    print(f"model {loaded.description} on {device_description()}, {args.requests} prompts, "
          f"{args.new_tokens} tokens")
    results = asyncio.run(compare(loaded, args.requests, args.new_tokens))
    for name, diffs in results.items():
        same = sum(d is None for d in diffs)
        marks = " ".join("=" if d is None else str(d) for d in diffs)
        print(f"{name:<26} {same}/{len(diffs)} identical; first difference at: {marks}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
