"""Synthetic load: arrival processes and a runner that measures serving metrics.

One implementation for the benchmark's online-serving scenario and the app's load
simulator. Metrics follow `vllm bench serve`: TTFT = send -> first token; TPOT =
(E2E - TTFT) / (tokens - 1); ITL = every gap between streamed tokens, pooled. A reasoning
model's replies also have TTFAT = send -> first token of the answer (its thinking done).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from app.request import ChatRequest, Refusal
from engine.public import EngineError, SamplingParams

if TYPE_CHECKING:
    from app.backend import Backend


def gamma_gaps(rate: float, burstiness: float = 1.0, seed: int | None = None) -> Iterator[float]:
    """Gaps between arrivals at `rate` requests/s; burstiness 1 = Poisson (as vLLM)."""
    if rate <= 0 or burstiness <= 0:
        raise ValueError("rate and burstiness must be > 0")
    rng = random.Random(seed)
    theta = 1.0 / (rate * burstiness)
    while True:
        yield rng.gammavariate(burstiness, theta)


def uniform_gaps(low: float = 0.5, high: float = 2.0, seed: int | None = None) -> Iterator[float]:
    """Gaps drawn uniformly from [low, high] seconds (the LLMEval app's simulation)."""
    if not 0 <= low <= high:
        raise ValueError("need 0 <= low <= high")
    rng = random.Random(seed)
    while True:
        yield rng.uniform(low, high)


def burst_gaps(size: int, every_s: float) -> Iterator[float]:
    """Bursts of `size` requests at once, one burst every `every_s` seconds.

    Gap k is the wait before request k + 1 (request 0 goes at once).
    """
    if size < 1 or every_s < 0:
        raise ValueError("need size >= 1 and every_s >= 0")
    i = 1
    while True:
        yield every_s if i % size == 0 else 0.0
        i += 1


@dataclass(slots=True)
class RequestResult:
    index: int
    prompt: str
    request_id: str | None = None
    text: str = ""
    output_tokens: int = 0
    prompt_tokens: int = 0
    finish_reason: str | None = None
    error: str | None = None
    send_t: float = 0.0
    ttft_s: float | None = None
    # a reasoning model's reply: send -> first token of its answer (None: no split, or no
    # answer yet)
    ttfat_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    queue_s: float | None = None

    @property
    def tpot_s(self) -> float | None:
        if self.ttft_s is None or self.e2e_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"tpot_s": self.tpot_s}


def summarize(results: Sequence[RequestResult], duration_s: float) -> dict[str, Any]:
    """Counts, throughput and mean/median/p90/p99 of TTFT, TPOT, ITL and E2E."""
    done = [r for r in results if r.finish_reason not in (None, "cancelled", "error", "shutdown")]

    def dist(values: list[float]) -> dict[str, float]:
        if not values:
            return {"mean": 0.0, "median": 0.0, "p90": 0.0, "p99": 0.0, "n": 0}
        v = sorted(values)
        return {"mean": statistics.fmean(v), "median": statistics.median(v),
                "p90": percentile(v, 90), "p99": percentile(v, 99), "n": len(v)}

    out_tokens = sum(r.output_tokens for r in results)
    return {
        "requests": len(results),
        "completed": len(done),
        "cancelled": sum(r.finish_reason == "cancelled" for r in results),
        "failed": sum(r.finish_reason in ("error", "shutdown") for r in results),
        "duration_s": duration_s,
        "request_throughput": len(done) / duration_s if duration_s > 0 else 0.0,
        "output_throughput": out_tokens / duration_s if duration_s > 0 else 0.0,
        "total_output_tokens": out_tokens,
        "ttft_s": dist([r.ttft_s for r in done if r.ttft_s is not None]),
        "ttfat_s": dist([r.ttfat_s for r in done if r.ttfat_s is not None]),
        "tpot_s": dist([r.tpot_s for r in done if r.tpot_s is not None]),
        "itl_s": dist([g for r in done for g in r.itl_s]),
        "e2e_s": dist([r.e2e_s for r in done if r.e2e_s is not None]),
    }


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default) of already sorted values."""
    if not sorted_values:
        return 0.0
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


async def run_workload(
    target: Backend,
    prompts: Sequence[str] | Callable[[int, random.Random], str],
    gaps: Iterator[float],
    num_requests: int | None,
    params: Callable[[int, random.Random], SamplingParams] | SamplingParams,
    *,
    priority: str = "background",
    cancel_probability: float = 0.0,
    seed: int = 0,
    tag: str = "sim",
    on_result: Callable[[RequestResult], None] | None = None,
    stop: asyncio.Event | None = None,
    duration_s: float | None = None,
    on_send: Callable[[RequestResult], None] | None = None,
    answer_split: Callable[[Any], Any] | None = None,
) -> tuple[list[RequestResult], float]:
    """Send requests at the given gaps to `target` (app.backend's one road: each a
    ChatRequest of one user message); return results (in send order) and the wall time.

    Sending ends after `num_requests`, or once `duration_s` has passed (whichever comes
    first; at least one must be given); requests already sent then run to their end.
    `prompts` is a list used round-robin or a function of (index, rng). A request is
    cancelled mid-stream with `cancel_probability`. Setting `stop` ends the run early:
    nothing more is sent and everything still running is cancelled. `answer_split(stream)`:
    a fresh engine.public ReasoningSplit for a reasoning model's reply (None: all answer),
    which times the first token of the answer (TTFAT).
    """
    if num_requests is None and duration_s is None:
        raise ValueError("give num_requests, duration_s or both")
    rng = random.Random(seed)
    results: list[RequestResult] = []
    tasks: list[asyncio.Task[None]] = []
    streams: list[Any] = []
    t0 = time.perf_counter()

    async def one(result: RequestResult, sampling: SamplingParams, cancel_after: int | None):
        result.send_t = time.perf_counter() - t0
        if stop is not None and stop.is_set():  # stopped before this one got to go
            result.finish_reason = "cancelled"
            _report(result)
            return
        try:
            request = ChatRequest(messages=[{"role": "user", "content": result.prompt}],
                                  params=sampling)
            stream = target.submit(request, priority=priority,
                                   tag=f"{tag}-{result.index}").stream
        except (Refusal, EngineError) as exc:  # refused (queue full, engine stopped…): counted
            result.error, result.finish_reason = str(exc), "error"
            _report(result)
            return
        streams.append(stream)
        result.request_id = stream.request_id
        result.prompt_tokens = len(stream.prompt_tokens)
        sent = time.perf_counter()
        last = None
        split = answer_split(stream) if answer_split is not None else None
        async for event in stream:
            now = time.perf_counter()
            if split is not None and result.ttfat_s is None and any(
                    p.kind != "reasoning" for p in split.feed(event.text)):
                result.ttfat_s = now - sent
            if event.token is not None:
                if last is None:
                    result.ttft_s = now - sent
                else:
                    result.itl_s.append(now - last)
                last = now
                result.output_tokens += 1
                if cancel_after is not None and result.output_tokens >= cancel_after:
                    stream.cancel()
        result.e2e_s = time.perf_counter() - sent
        result.text = stream.text
        result.finish_reason = stream.finish_reason
        result.error = stream.error
        result.queue_s = stream.stats.queue_s if stream.stats else None
        _report(result)

    def _report(result: RequestResult) -> None:
        if on_result is not None:
            on_result(result)

    deadline = None if duration_s is None else t0 + duration_s
    i = 0
    while num_requests is None or i < num_requests:
        if i:
            gap = next(gaps)
            if deadline is not None and time.perf_counter() + gap > deadline:
                break  # the next arrival would fall after the end of the run
            if stop is not None:
                try:
                    await asyncio.wait_for(stop.wait(), timeout=gap)
                except TimeoutError:
                    pass
            elif gap > 0:
                await asyncio.sleep(gap)
        if stop is not None and stop.is_set():
            break
        sampling = params(i, rng) if callable(params) else params
        cancel_after = None
        if cancel_probability and rng.random() < cancel_probability:
            # Within the first half, so the cancel lands before the request could end.
            cancel_after = rng.randint(1, max(1, sampling.max_tokens // 2))
        prompt = prompts(i, rng) if callable(prompts) else prompts[i % len(prompts)]
        result = RequestResult(index=i, prompt=prompt)
        results.append(result)
        if on_send is not None:
            on_send(result)
        tasks.append(asyncio.create_task(one(result, sampling, cancel_after)))
        i += 1
    if stop is not None:
        waiter = asyncio.create_task(stop.wait())
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending | {waiter},
                                               return_when=asyncio.FIRST_COMPLETED)
            pending.discard(waiter)
            if stop.is_set():
                for s in streams:
                    s.cancel()
                break
        waiter.cancel()
    await asyncio.gather(*tasks)
    return results, time.perf_counter() - t0
