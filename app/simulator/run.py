"""One simulation run: drives app.simulator.workload against a live engine, keeps every request
accounted for, and saves the run, each result as it completes, and the summary.

Qt-free: the simulator panel (through the app's EngineBridge) and the CLI (on a LocalTarget)
both use it, each through a Backend (app/backend). Simulated requests go in at background
priority, so chat tabs (interactive) are always scheduled first.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from app.backend import LoadBackend, Submission
from app.events import Event
from app.request import ChatRequest
from app.storage.records import SimResult, SimRun, utc_now
from engine.public import Piece, ReasoningSplit, SamplingParams

from .config import SimConfig
from .goodput import Slo, goodput

if TYPE_CHECKING:  # the engine (and mlx) loads only when a run starts
    from app.simulator.workload import RequestResult
    from engine.public import EventStream, Priority

TAG_PREFIX = "sim"  # request tags are "sim-<run>-<n>": never "tab-", so the stats panel
#                     lists them as "simulation"


# What a run sends requests to: a LocalBackend (the headless CLI's on its LocalTarget, the
# app's `EngineBridge.streams` for the simulator panel) or a remote server's RemoteBackend.
LoadTarget = LoadBackend


class RunRecorder(Protocol):
    """Where a run is saved: the app's HistoryRecords (the Workspace's entry into the
    history store's one writer) or the CLI's own Store."""

    def save_sim_run(self, run: SimRun) -> object: ...

    def add_sim_results(self, results: list[SimResult]) -> object: ...


@dataclass(frozen=True, slots=True)
class SimRow:
    """A results-table row for one request (filled in as it completes)."""

    index: int
    prompt: str
    reply: str
    prompt_tokens: int
    output_tokens: int
    finish_reason: str  # "running" until it ends
    error: str | None
    queue_s: float | None
    ttft_s: float | None
    tokens_per_s: float | None
    e2e_s: float | None


class SimulationRun:
    """Events: `sent(row)` when a request goes out, `completed(row)` when it ends,
    `finished(summary)` once the run is over (normally or stopped)."""

    def __init__(self, target: LoadTarget, config: SimConfig,
                 recorder: RunRecorder | None = None, title: str | None = None) -> None:
        self.target = target
        self.config = config.validate()
        self.recorder = recorder  # None: keep nothing
        self.seed = (config.seed if config.seed is not None
                     else random.SystemRandom().getrandbits(32))
        self.record = SimRun(title=title or f"Simulation: {config.describe()}",
                             config=config.to_dict() | {"seed": self.seed})
        self.sent = Event()
        self.completed = Event()
        self.finished = Event()
        self.results: list[RequestResult] = []  # appended as each request is sent
        self.summary: dict[str, Any] | None = None
        self.stopped = False
        self._stop = asyncio.Event()
        self._task: asyncio.Task[dict[str, Any]] | None = None
        self._t0 = 0.0
        self._streams: dict[str, Any] = {}  # request id -> its stream, until it is reported

    # -- control --------------------------------------------------------------------------
    def start(self) -> asyncio.Task[dict[str, Any]]:
        """Begin on the running loop; the task's result is the summary."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run())
        return self._task

    def stop(self) -> None:
        """Send nothing more and cancel what is running; every request is still counted."""
        self.stopped = True
        self._stop.set()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self._t0 if self._t0 else 0.0

    async def run(self) -> dict[str, Any]:
        from app.simulator.workload import run_workload

        cfg = self.config
        prompts = cfg.prompt_set()
        previous_limit = None
        if cfg.max_concurrent is not None:
            previous_limit = self.target.max_concurrent
            self.target.set_max_concurrent(cfg.max_concurrent)
        self._save()
        self._t0 = time.perf_counter()
        try:
            recorder = _Recorder(self.target, self._streams)
            results, wall = await run_workload(
                recorder, prompts.expand, cfg.gaps(self.seed),
                cfg.num_requests,
                lambda i, rng: SamplingParams.from_dict(cfg.sampling_for(rng)),
                priority="background", cancel_probability=cfg.cancel_probability,
                seed=self.seed, tag=f"{TAG_PREFIX}-{self.record.id[:8]}",
                on_result=self._on_result, on_send=self._on_send, stop=self._stop,
                duration_s=cfg.duration_s, answer_split=recorder.answer_split,
            )
        finally:
            if previous_limit is not None:
                self.target.set_max_concurrent(previous_limit)
        self.summary = summarize_run(results, wall, stopped=self.stopped, slo=cfg.slo())
        description = getattr(self.target, "description", None)
        if description:
            self.summary["target"] = description
        self.record.summary = self.summary
        self.record.ended_at = utc_now()
        self._save()
        self.finished.emit(self.summary)
        return self.summary

    # -- callbacks from the workload ------------------------------------------------------
    def _on_send(self, result: RequestResult) -> None:
        self.results.append(result)
        self.sent.emit(row_of(result))

    def _on_result(self, result: RequestResult) -> None:
        stream = self._streams.pop(result.request_id or "", None)
        if stream is not None:
            take_server_counts(result, stream)
        row = row_of(result)
        if self.recorder is not None:
            self.recorder.add_sim_results([SimResult(
                sim_run_id=self.record.id, seq=result.index, prompt=result.prompt,
                reply=result.text, prompt_tokens=result.prompt_tokens,
                generated_tokens=result.output_tokens, finish_reason=row.finish_reason,
                queue_s=result.queue_s, ttft_s=result.ttft_s, tokens_per_s=row.tokens_per_s,
            )])
        self.completed.emit(row)

    def _save(self) -> None:
        if self.recorder is not None:
            self.recorder.save_sim_run(self.record)


class _Recorder:
    """The run's target as app.simulator.workload sends to it (a Backend): remembers each
    stream by request id, and how a reasoning model's reply splits."""

    def __init__(self, target: LoadTarget, streams: dict[str, Any]) -> None:
        self._target = target
        self._streams = streams
        self._shapes: dict[str, Any] = {}  # a reasoning model's replies: how they split

    @property
    def description(self) -> str:
        return self._target.description

    @property
    def sees_images(self) -> bool:
        return self._target.sees_images

    def submit(self, request: ChatRequest, *, priority: Priority | str = "background",
               tag: str | None = None, request_id: str | None = None,
               share_prompt_with: str | None = None) -> Submission:
        taken = self._target.submit(request, priority=priority, tag=tag,
                                    request_id=request_id, share_prompt_with=share_prompt_with)
        stream = taken.stream
        self._streams[stream.request_id] = stream
        if taken.shape is not None:
            self._shapes[stream.request_id] = taken.shape
        return taken

    def answer_split(self, stream: EventStream) -> ReasoningSplit | ServerSplit | None:
        """A splitter for the reply's thinking and answer (TTFAT), None: all answer. A
        remote server's reply comes split by the server (its `reasoning` apart)."""
        shape = self._shapes.pop(stream.request_id, None)
        if shape is not None:
            return ReasoningSplit(shape.style, shape.inside)
        return ServerSplit(stream) if hasattr(stream, "reasoning") else None


class ServerSplit:
    """A remote reply as its server split it: the thinking arrives as `reasoning_content`
    (llama.cpp, this app's server) or `reasoning` (vLLM) deltas, kept apart on the stream
    (app/remote/stream.py: events of no text), the answer as text. Its first text after
    some thinking is the answer's first token (TTFAT); a reply that never thought has
    none, as a local model that does not think."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def feed(self, text: str) -> list[Piece]:
        return [Piece("content", text)] if text and self._stream.reasoning else []


def take_server_counts(result: RequestResult, stream: Any) -> None:
    """A remote server streams text chunks, not tokens: where it reported its own counts
    (the OpenAI `usage` chunk, on app.remote's streams) they replace the chunk count, so
    TPOT divides by real tokens as `vllm bench serve` does. Engine streams are exact already."""
    usage = getattr(stream, "usage", None)
    stats = stream.stats
    if usage and stats is not None:
        result.output_tokens = stats.generated_tokens
        result.prompt_tokens = stats.prompt_tokens


def decode_rate(result: RequestResult) -> float | None:
    """Tokens/s after the first token (1 / TPOT), as the chat tabs report it."""
    tpot = result.tpot_s
    return 1.0 / tpot if tpot else None


def row_of(result: RequestResult) -> SimRow:
    return SimRow(
        index=result.index, prompt=result.prompt, reply=result.text,
        prompt_tokens=result.prompt_tokens, output_tokens=result.output_tokens,
        finish_reason=result.finish_reason or "running", error=result.error,
        queue_s=result.queue_s, ttft_s=result.ttft_s, tokens_per_s=decode_rate(result),
        e2e_s=result.e2e_s,
    )


def summarize_run(results: list[RequestResult], wall_s: float, *,
                  stopped: bool, slo: Slo | None = None) -> dict[str, Any]:
    """app.simulator.workload.summarize, goodput under the run's limits, and what a saved run needs
    to redraw its chart."""
    from app.simulator.workload import summarize

    summary = summarize(results, wall_s) | goodput(results, wall_s, slo or Slo())
    summary["stopped"] = stopped
    summary["unaccounted"] = sum(r.finish_reason is None for r in results)
    summary["ttft_by_request"] = [r.ttft_s for r in results]
    summary["e2e_by_request"] = [r.e2e_s for r in results]
    return summary
