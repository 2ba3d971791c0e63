"""The benchmark scenarios. Each returns a plain dict; the engine runs its real async path."""

from __future__ import annotations

import asyncio
import statistics
import time
from types import SimpleNamespace
from typing import Any

from app.request import ChatRequest
from app.simulator.workload import gamma_gaps, percentile, run_workload, summarize
from engine import cpu_kernels
from engine.config import EngineConfig
from engine.engine import Engine

from . import peers
from .request_sampling import GREEDY_REQUESTS, RequestSampling

TOPICS = ["a lighthouse keeper", "a lost robot", "the first city on Mars", "a jazz pianist",
          "an old oak tree", "a chess prodigy", "a deep-sea diver", "a time traveller",
          "a bakery at dawn", "a mountain rescue", "a desert caravan", "a library ghost",
          "a river pilot", "a clockmaker", "a storm chaser", "a beekeeper"]
FILLER = ("Describe the setting in detail, the people who live there, what they want, what "
          "stands in their way, and how the day changes them. Use vivid sensory language, "
          "give every character a distinct voice, and end with a surprising but earned twist. ")


def prompt_texts(n: int, filler_repeats: int = 2) -> list[str]:
    return [f"Write a long story about {TOPICS[i % len(TOPICS)]} (story {i + 1}). "
            + FILLER * filler_repeats for i in range(n)]


def chat_tokens(engine: Engine, text: str) -> list[int]:
    templated = engine.tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False)
    return list(engine.tokenizer.encode(templated, add_special_tokens=False))


async def _engine_batch(engine: Engine, prompts: list[list[int]], new_tokens: int,
                        priority: str = "background",
                        sampling: RequestSampling = GREEDY_REQUESTS) -> dict:
    t0 = time.perf_counter()
    ticks_before = engine.stats().ticks
    streams = [engine.submit(prompt_tokens=p, params=sampling.params(new_tokens),
                             priority=priority) for p in prompts]
    await asyncio.gather(*(s.result() for s in streams))
    wall = time.perf_counter() - t0
    tokens = sum(len(s.tokens) for s in streams)
    ticks = engine.telemetry()[-(engine.stats().ticks - ticks_before):]
    # Decode-only ticks at the widest batch this run reached (some finish early by EOS).
    widest = max((t.decode_rows for t in ticks if not t.prefill_tokens), default=0)
    decode_ticks = [t for t in ticks if t.decode_rows == widest and not t.prefill_tokens
                    and widest]
    return {
        "tokens": tokens, "wall_s": wall, "output_tps": tokens / wall,
        "step_s_median": statistics.median([t.step_s for t in decode_ticks])
        if decode_ticks else 0.0,
        "decode_tps": statistics.median([t.decode_rows / t.step_s for t in decode_ticks])
        if decode_ticks else 0.0,
        "overhead_share": statistics.fmean([(t.step_s - t.forward_s) / t.step_s
                                            for t in decode_ticks]) if decode_ticks else 0.0,
        "ticks": len(ticks),
    }


async def solo(engine: Engine, prompt: list[int], new_tokens: int, repeats: int,
               sampling: RequestSampling = GREEDY_REQUESTS) -> dict:
    ours, theirs = [], []
    for _ in range(repeats):
        s = engine.submit(prompt_tokens=prompt, params=sampling.params(new_tokens))
        await s.result()
        st = s.stats
        ours.append({"prompt_tps": st.prompt_tokens / (st.ttft_s - st.queue_s),
                     "decode_tps": st.tokens_per_s, "tokens": st.generated_tokens})
        # The peer runs on this (loop) thread while the engine thread sleeps.
        theirs.append(peers.mlx_lm_solo(engine.model, engine.tokenizer, prompt, new_tokens,
                                        sampling))

    def med(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    out = {"prompt_tokens": len(prompt), "new_tokens": new_tokens, "repeats": repeats}
    for key in ("prompt_tps", "decode_tps"):
        out[f"engine_{key}"] = med(ours, key)
        out[f"mlx_lm_{key}"] = med(theirs, key)
        out[f"{key}_ratio"] = out[f"engine_{key}"] / out[f"mlx_lm_{key}"]
    return out


async def offline(engine: Engine, prompts: list[list[int]], new_tokens: int,
                  concurrency: list[int], repeats: int,
                  priorities: tuple[str, ...] = ("background",),
                  peer_kernels: bool = False,
                  sampling: RequestSampling = GREEDY_REQUESTS) -> list[dict]:
    """Batch jobs: all prompts at once. The first priority class gives the headline
    numbers; each class also gets its own `engine_<class>_output_tps` and ratio.

    With `peer_kernels`, BatchGenerator also runs with the engine's CPU kernels switched
    on for its thread: the ratio against that run is what the scheduling alone buys."""
    rows = []
    stop = [[t] for t in sorted(engine._core.eos_token_ids)]
    for c in concurrency:
        batch = prompts[:c]
        ours: dict[str, list[dict]] = {p: [] for p in priorities}
        theirs, theirs_fast = [], []
        for _ in range(repeats):  # alternate, so a noisy moment hits both sides
            for p in priorities:
                ours[p].append(await _engine_batch(engine, batch, new_tokens, p, sampling))
            theirs.append(peers.batch_generator_run(engine.model, batch, new_tokens, stop,
                                                    sampling))
            if peer_kernels:  # on the engine's own modules (engine.model is left as loaded)
                runner = engine._core.runner
                with cpu_kernels.active(runner.cpu):
                    theirs_fast.append(peers.batch_generator_run(runner.model, batch,
                                                                 new_tokens, stop, sampling))
        row: dict[str, Any] = {"concurrency": c, "priority": priorities[0]}
        for name, runs in (("engine", ours[priorities[0]]), ("batch_generator", theirs)):
            for key in ("output_tps", "decode_tps", "step_s_median"):
                row[f"{name}_{key}"] = statistics.median(r[key] for r in runs)
        row["engine_overhead_share"] = statistics.median(
            r["overhead_share"] for r in ours[priorities[0]])
        row["output_tps_ratio"] = row["engine_output_tps"] / row["batch_generator_output_tps"]
        if theirs_fast:
            fast = statistics.median(r["output_tps"] for r in theirs_fast)
            row["batch_generator_kernels_output_tps"] = fast
            row["output_tps_ratio_vs_kernels"] = row["engine_output_tps"] / fast
        for p in priorities:
            tps = statistics.median(r["output_tps"] for r in ours[p])
            row[f"engine_{p}_output_tps"] = tps
            row[f"{p}_output_tps_ratio"] = tps / row["batch_generator_output_tps"]
        rows.append(row)
    return rows


class EngineTarget:
    """The Engine as app.simulator.workload's target (a Backend's submit): each request's
    messages and settings go straight to Engine.submit, so the figures stay the engine's
    own, with no app.request rendering in between. What it returns has the one field of
    app.backend's Submission the workload reads (`stream`): app.backend would load the
    attachments' and images' readers, and the benchmarks run where only mlx, mlx-lm and
    aiohttp are installed (a lent GPU machine)."""

    description = "engine"
    sees_images = False

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def submit(self, request: ChatRequest, *, priority: str = "interactive",
               tag: str | None = None, request_id: str | None = None,
               share_prompt_with: str | None = None) -> SimpleNamespace:
        return SimpleNamespace(stream=self.engine.submit(
            messages=list(request.messages or ()), params=request.params, priority=priority,
            tag=tag))


async def online(engine: Engine, texts: list[str], rate: float, num_requests: int,
                 new_tokens: int, burstiness: float = 1.0, seed: int = 0,
                 sampling: RequestSampling = GREEDY_REQUESTS) -> dict:
    results, wall = await run_workload(
        EngineTarget(engine), texts, gamma_gaps(rate, burstiness, seed), num_requests,
        sampling.params(new_tokens), priority="interactive", seed=seed)
    return {"rate": rate, "burstiness": burstiness, **summarize(results, wall),
            "per_request": [r.to_dict() | {"itl_s": None} for r in results]}


async def head_of_line(engine: Engine, prompts: list[list[int]], long_prompt: list[int],
                       new_tokens: int, sampling: RequestSampling = GREEDY_REQUESTS) -> dict:
    """8 streams decode; a long prompt arrives; what happens to their inter-token gaps?"""
    streams = [engine.submit(prompt_tokens=p, params=sampling.params(new_tokens))
               for p in prompts[:8]]
    arrivals: dict[int, list[float]] = {i: [] for i in range(8)}

    async def watch(i: int, s: Any) -> None:
        async for event in s:
            if event.token is not None:
                arrivals[i].append(time.perf_counter())

    watchers = [asyncio.create_task(watch(i, s)) for i, s in enumerate(streams)]
    while min(len(a) for a in arrivals.values()) < 5:
        await asyncio.sleep(0.01)
    before_gaps = _gaps(arrivals, 0.0, float("inf"))
    t_long = time.perf_counter()
    long = engine.submit(prompt_tokens=long_prompt, params=sampling.params(4))
    first = None
    async for event in long:
        if event.token is not None and first is None:
            first = time.perf_counter()
    ttft = first - t_long
    during = _gaps(arrivals, t_long, first)
    for s in streams:
        s.cancel()
    await asyncio.gather(*watchers)
    # A short "long" prompt is prefilled within one tick, before any stream's next token:
    # then there is no gap to measure, which is reported as None, not as a crash.
    during_median = statistics.median(during) if during else None
    during_p99 = percentile(sorted(during), 99) if during else None
    return {"long_prompt_tokens": len(long_prompt), "long_ttft_s": ttft,
            "itl_during_median_s": during_median,
            "itl_during_p99_s": during_p99,
            "itl_before_median_s": statistics.median(before_gaps),
            "p99_over_median": during_p99 / during_median if during else None,
            "gaps_during": len(during)}


def _gaps(arrivals: dict[int, list[float]], start: float, end: float) -> list[float]:
    gaps = []
    for times in arrivals.values():
        for a, b in zip(times, times[1:], strict=False):
            if start <= b <= end:
                gaps.append(b - a)
    return gaps


def head_of_line_batch_generator(engine: Engine, prompts: list[list[int]],
                                 long_prompt: list[int], new_tokens: int,
                                 sampling: RequestSampling = GREEDY_REQUESTS) -> dict:
    from mlx_lm.generate import BatchGenerator

    gen = BatchGenerator(engine.model, max_tokens=new_tokens, **sampling.mlx_lm_kwargs())
    gen.insert(prompts[:8])
    for _ in range(8):  # prefill the eight and let them decode a few steps
        gen.next_generated()
    t_long = time.perf_counter()
    (long_uid,) = gen.insert([long_prompt], max_tokens=[4])
    gaps, last, first = [], time.perf_counter(), None
    while first is None:
        responses = gen.next_generated()
        now = time.perf_counter()
        if any(r.uid == long_uid for r in responses):
            first = now
        if any(r.uid != long_uid for r in responses):
            gaps.append(now - last)
            last = now
    gen.close()
    return {"long_ttft_s": first - t_long, "itl_during_median_s": statistics.median(gaps),
            "itl_during_p99_s": percentile(sorted(gaps), 99),
            "p99_over_median": percentile(sorted(gaps), 99) / statistics.median(gaps)}


def make_engine(loaded: Any, max_concurrent: int) -> Engine:
    return Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                  context_length=loaded.context_length,
                  config=EngineConfig(max_concurrent=max_concurrent, max_queue=4096),
                  description=getattr(loaded, "description", ""))
