"""The peers we compare against, on the same loaded weights: mlx-lm's own generators."""

from __future__ import annotations

import time
from typing import Any

import mlx.core as mx
from mlx_lm import stream_generate
from mlx_lm.generate import BatchGenerator

from .request_sampling import GREEDY_REQUESTS, RequestSampling


def mlx_lm_solo(model: Any, tokenizer: Any, prompt: list[int], new_tokens: int,
                sampling: RequestSampling = GREEDY_REQUESTS) -> dict:
    """stream_generate's own prompt and decode rates (it excludes the first token's wait)."""
    responses = list(stream_generate(model, tokenizer, prompt, max_tokens=new_tokens,
                                     **sampling.mlx_lm_kwargs()))
    last = responses[-1]
    return {"prompt_tps": last.prompt_tps, "decode_tps": last.generation_tps,
            "tokens": last.generation_tokens}


def batch_generator_run(model: Any, prompts: list[list[int]], new_tokens: int,
                        stop_tokens: list[list[int]] | None = None,
                        sampling: RequestSampling = GREEDY_REQUESTS) -> dict:
    """All prompts inserted at once into BatchGenerator with its defaults and `sampling`'s
    chain; run to the end."""
    gen = BatchGenerator(model, max_tokens=new_tokens, stop_tokens=stop_tokens,
                         completion_batch_size=max(32, len(prompts)), **sampling.mlx_lm_kwargs())
    t0 = time.perf_counter()
    gen.insert(prompts)
    tokens = 0
    first = None
    step_times = []
    live = len(prompts)
    while live:
        ts = time.perf_counter()
        responses = gen.next_generated()
        if not responses:
            break
        step_times.append(time.perf_counter() - ts)
        if first is None:
            first = time.perf_counter()
        tokens += len(responses)
        live -= sum(r.finish_reason is not None for r in responses)
    wall = time.perf_counter() - t0
    gen.close()
    decode_wall = time.perf_counter() - first if first else wall
    mx.clear_cache()
    return {"tokens": tokens, "wall_s": wall, "output_tps": tokens / wall,
            "decode_tps": tokens / (wall - (first - t0)) if first else 0.0,
            "step_s_median": sorted(step_times)[len(step_times) // 2] if step_times else 0.0,
            "decode_wall_s": decode_wall}
