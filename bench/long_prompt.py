"""Time to the first token of one long prompt on an idle engine (issue #19's 8k target).

    python -m bench.long_prompt [--tokens 8000] [--model bundled]

The prompt is synthetic token ids (the content does not change the work). Run it with
BATCHCHAT_NATIVE_QMV=0 as well to compare with the float32 path.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from engine.preload import ensure_preloads


async def main(args: argparse.Namespace) -> None:
    from engine.config import EngineConfig
    from engine.engine import Engine
    from engine.loader import load_model
    from engine.sampling_params import SamplingParams

    lm = load_model(args.model)
    engine = Engine(lm.model, lm.tokenizer, eos_token_ids=lm.eos_token_ids,
                    context_length=lm.context_length, config=EngineConfig())
    await engine.start()
    try:
        prompt = [(i * 7919) % 40000 + 100 for i in range(args.tokens)]
        start = time.perf_counter()
        stream = engine.submit(prompt_tokens=prompt, params=SamplingParams(max_tokens=2))
        async for event in stream:
            if event.token is not None:
                print(f"{lm.description}: {args.tokens}-token prompt, first token after "
                      f"{time.perf_counter() - start:.1f} s")
                break
        stream.cancel()
    finally:
        await engine.shutdown()


if __name__ == "__main__":
    ensure_preloads()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="bundled")
    p.add_argument("--tokens", type=int, default=8000)
    asyncio.run(main(p.parse_args()))
    sys.stdout.flush()
    os._exit(0)  # MLX's static destructors can abort after worker-thread use (mlx#3126)
