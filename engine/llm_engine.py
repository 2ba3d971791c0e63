"""The synchronous core: one `step()` is one tick. Only one thread may touch it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn

from . import cache as kv
from .config import EngineConfig
from .model_runner import ModelRunner
from .sampling import sample_rows
from .scheduler import Scheduler, group_prefill
from .sequence import Priority, Sequence, Status
from .stats import EngineStats, RequestRow, RequestStats, StatsCollector, TickRecord


@dataclass(frozen=True, slots=True)
class TokenEvent:
    request_id: str
    token: int | None  # None on an event that only ends the request
    text: str  # text delta, safe to show (stop strings never leak)
    finish_reason: str | None = None  # stop | length | context | cancelled | error | shutdown
    error: str | None = None
    stats: RequestStats | None = None  # set on the final event


class LLMEngine:
    def __init__(
        self,
        model: nn.Module,
        eos_token_ids: frozenset[int],
        context_length: int,
        config: EngineConfig,
        on_admit: Callable[[Sequence], None] | None = None,
        on_finish: Callable[[Sequence, bool], None] | None = None,
    ) -> None:
        self.config = config
        self.model = model
        self.runner = ModelRunner(model, fast_cpu_kernels=config.cpu_kernels)
        self.eos_token_ids = eos_token_ids
        self.context_length = context_length
        self.scheduler = Scheduler(config)
        self.stats = StatsCollector(config.stats_window_s, config.telemetry_size)
        self.decoding: list[Sequence] = []  # rows of the decode batch, in order
        self.batch_cache: kv.LayerCaches | None = None  # set while 2+ sequences decode
        self._by_id: dict[str, Sequence] = {}
        self._on_admit = on_admit or (lambda seq: None)
        self._on_finish = on_finish or (lambda seq, was_active: None)
        self._events: list[TokenEvent] = []
        # A lone sequence's next step, built and started before its current token is
        # delivered (as mlx-lm's generate_step does): (sequence, its next token, unevaluated).
        self._ahead: tuple[Sequence, mx.array] | None = None

    # -- requests in and out ------------------------------------------------------------
    def add(self, seq: Sequence) -> None:
        self._by_id[seq.request_id] = seq
        self.scheduler.add(seq)

    def cancel(self, request_id: str, reason: str = "cancelled") -> None:
        seq = self._by_id.get(request_id)
        if seq is not None and not seq.is_finished:
            self._finish(seq, reason)
            self._drop_finished_rows()

    def abort_all(self, reason: str, error: str | None = None) -> list[TokenEvent]:
        for seq in list(self._by_id.values()):
            seq.error = seq.error or error
            self._finish(seq, reason)
        self._drop_finished_rows()
        return self._take_events()

    @property
    def num_active(self) -> int:
        return len(self.scheduler.prefilling) + len(self.decoding)

    def has_work(self) -> bool:
        return bool(self._by_id)

    # -- the tick -----------------------------------------------------------------------
    def step(self) -> list[TokenEvent]:
        t0 = time.perf_counter()
        for seq in self.scheduler.admit(self.num_active):
            seq.t_admit = t0
            seq.cache = kv.new_cache(self.model)
            self._on_admit(seq)
        interactive = any(s.priority is Priority.INTERACTIVE for s in self.decoding)
        budgeted = bool(self.decoding)  # else the plan had all the room, not the allowance
        plan = self.scheduler.plan(len(self.decoding), interactive)

        prefill_s = self._run_prefill(plan.prefill)
        self._join(self.scheduler.take_ready())
        rows = len(self.decoding)
        batched = self.batch_cache is not None
        t1 = time.perf_counter()
        tokens_out, decode_forward_s = self._run_decode() if rows else (0, 0.0)
        decode_s = time.perf_counter() - t1
        self._drop_finished_rows()

        t_end = time.perf_counter()
        step_s = t_end - t0
        self.scheduler.budget.observe(rows, decode_s, plan.num_prefill_tokens, prefill_s, step_s,
                                      interactive, budgeted)
        self.stats.record_tick(
            TickRecord(
                index=self.stats.num_ticks,
                t=t_end,
                decode_rows=rows,
                prefill_tokens=plan.num_prefill_tokens,
                prefill_seqs=len(plan.prefill),
                step_s=step_s,
                forward_s=prefill_s + decode_forward_s,
                budget=plan.budget,
                tokens_out=tokens_out,
                batched=batched,
            )
        )
        return self._take_events()

    def _run_prefill(self, chunks: list[tuple[Sequence, int]]) -> float:
        t = time.perf_counter()
        for group in group_prefill(chunks):
            pieces = [seq.prompt_tokens[seq.num_cached : seq.num_cached + n] for seq, n in group]
            try:
                if len(group) == 1:
                    self.runner.prefill(group[0][0].cache, pieces[0])
                else:
                    caches = self.runner.prefill_many([seq.cache for seq, _ in group], pieces)
                    for (seq, _), cache in zip(group, caches, strict=True):
                        seq.cache = cache
            except Exception as exc:  # noqa: BLE001 - these requests fail, the engine goes on
                for seq, _ in group:
                    self._fail(seq, exc)
                continue
            for seq, n in group:
                seq.num_cached += n
        return time.perf_counter() - t

    def _join(self, ready: list[Sequence]) -> None:
        """Prefilled sequences join decoding; the solo cache moves into the batch as is."""
        ready = [s for s in ready if not s.is_finished]
        if not ready:
            return
        self._roll_back_ahead()  # the lone sequence is about to be batched
        for seq in ready:
            seq.status = Status.DECODING
        if self.batch_cache is not None:
            kv.extend(self.batch_cache, [s.cache for s in ready])
            moved = ready
        elif self.decoding or len(ready) > 1:
            # Promotion: the solo decoder's cache joins the batch as it is, no recompute.
            moved = self.decoding + ready
            self.batch_cache = kv.merge([s.cache for s in moved])
        else:
            moved = []  # one sequence alone: it stays on the solo fast path
        for seq in moved:
            seq.cache = None
        self.decoding.extend(ready)

    def _run_decode(self) -> tuple[int, float]:
        """Decode one token per row; return (tokens, seconds of forward pass + sampling)."""
        t0 = time.perf_counter()
        seqs = self.decoding
        cache = self.batch_cache if self.batch_cache is not None else seqs[0].cache
        try:
            if self._ahead is not None and self._ahead[0] is seqs[0] and len(seqs) == 1:
                picked = self._ahead[1]  # started last tick
            else:
                self._roll_back_ahead()
                logits = self.runner.decode(cache, [s.next_input for s in seqs])
                picked = sample_rows(
                    [s.sampler for s in seqs],
                    [s.prompt_tokens + s.output_tokens for s in seqs]
                    if any(s.sampler.params.repetition_penalty != 1.0 for s in seqs)
                    else [[] for _ in seqs],
                    [s.num_output_tokens for s in seqs],
                    logits,
                )
            self._ahead = None
            if self._may_run_ahead(seqs):
                seq = seqs[0]
                nxt = sample_rows([seq.sampler], [[]], [seq.num_output_tokens + 1],
                                       self.runner.decode(cache, picked))
                mx.async_eval(nxt)
                self._ahead = (seq, nxt)
            tokens = picked.tolist()
        except Exception as exc:  # noqa: BLE001 - the tick's requests fail, the engine goes on
            self._ahead = None
            for seq in seqs:
                self._fail(seq, exc)
            return 0, time.perf_counter() - t0
        now = time.perf_counter()
        for seq, token in zip(seqs, tokens, strict=True):
            self._accept(seq, token, now)
        return len(tokens), now - t0

    def _may_run_ahead(self, seqs: list[Sequence]) -> bool:
        """Start the next step now only when the next tick is sure to be this lone sequence's
        plain decode: nothing else queued, and a sampler that needs no token history."""
        if len(seqs) != 1 or self.scheduler.prefilling or self.scheduler.num_waiting:
            return False
        seq = seqs[0]
        return (seq.sampler.params.repetition_penalty == 1.0
                and seq.num_output_tokens + 2 <= seq.params.max_tokens
                and seq.num_tokens + 2 <= self.context_length
                and all(layer.is_trimmable() for layer in seq.cache))

    def _roll_back_ahead(self) -> None:
        """Undo a started step that will not be used: its cache entry is trimmed away."""
        if self._ahead is not None:
            seq, _ = self._ahead
            self._ahead = None
            if seq.cache is not None:
                for layer in seq.cache:
                    layer.trim(1)

    def _accept(self, seq: Sequence, token: int, now: float) -> None:
        seq.output_tokens.append(token)
        if seq.t_first_token is None:
            seq.t_first_token = now
        reason = None
        if token in self.eos_token_ids:
            reason, delta = "stop", ""
        else:
            delta = seq.text.add(token)
            if seq.text.stopped:
                reason = "stop"
            elif seq.num_output_tokens >= seq.params.max_tokens:
                reason = "length"
            elif seq.num_tokens >= self.context_length:
                reason = "context"
        if reason is None:
            self._events.append(TokenEvent(seq.request_id, token, delta))
        else:
            self._finish(seq, reason, token=token, delta=delta)

    # -- endings ------------------------------------------------------------------------
    def _fail(self, seq: Sequence, exc: BaseException) -> None:
        seq.error = f"{type(exc).__name__}: {exc}"
        self._finish(seq, "error")

    def _finish(self, seq: Sequence, reason: str, token: int | None = None,
                delta: str = "") -> None:
        if seq.is_finished:
            return
        if self._ahead is not None and self._ahead[0] is seq:
            self._ahead = None  # its cache goes with it
        if seq.status in (Status.WAITING, Status.PREFILLING):
            self.scheduler.remove(seq)
        was_active = seq.status in (Status.PREFILLING, Status.DECODING)
        seq.status = Status.FINISHED
        seq.finish_reason = reason
        seq.t_finish = time.perf_counter()
        delta += seq.text.finish()
        if not (self.batch_cache is not None and seq in self.decoding):
            seq.cache = None  # a solo cache is freed now; batch rows go in _drop_finished_rows
        del self._by_id[seq.request_id]
        stats = RequestStats.of(seq)
        self.stats.record_finish(stats)
        self._on_finish(seq, was_active)
        self._events.append(
            TokenEvent(seq.request_id, token, delta, reason, error=seq.error, stats=stats)
        )

    def _drop_finished_rows(self) -> None:
        keep = [i for i, s in enumerate(self.decoding) if not s.is_finished]
        if len(keep) == len(self.decoding):
            return
        survivors = [self.decoding[i] for i in keep]
        if self.batch_cache is not None:
            if len(keep) >= 2:
                kv.keep_rows(self.batch_cache, mx.array(keep))
            elif len(keep) == 1:
                # Back to the solo fast path, with the cache as computed so far.
                survivors[0].cache = kv.extract(self.batch_cache, keep[0])
                self.batch_cache = None
            else:
                self.batch_cache = None
        self.decoding = survivors

    def _take_events(self) -> list[TokenEvent]:
        events, self._events = self._events, []
        return events

    # -- read-outs (call with stats.lock held, or from the engine thread) ----------------
    def snapshot(self) -> EngineStats:
        now = time.perf_counter()
        st = self.stats
        with st.lock:
            tps, mean_batch = st.window_rates(now)
            last = st.ticks[-1] if st.ticks else None
            return EngineStats(
                active=self.num_active,
                prefilling=len(self.scheduler.prefilling),
                decoding=len(self.decoding),
                queued=self.scheduler.num_waiting,
                completed=st.completed,
                cancelled=st.cancelled,
                failed=st.failed,
                total_generated_tokens=st.total_generated,
                total_prompt_tokens=st.total_prompt,
                tokens_per_s=tps,
                mean_batch_size=mean_batch,
                batch_size=len(self.decoding),
                budget=self.scheduler.budget.last_budget,
                step_s=last.step_s if last else 0.0,
                step_s_ewma=self.scheduler.budget.step_s,
                ticks=st.num_ticks,
                memory_bytes=mx.get_active_memory(),
                peak_memory_bytes=mx.get_peak_memory(),
                uptime_s=now - st.t_start,
            )

    def request_rows(self) -> list[RequestRow]:
        rows = []
        for seq in self._by_id.copy().values():  # copy(): one atomic call under the GIL
            s = RequestStats.of(seq)
            rows.append(RequestRow(seq.request_id, seq.tag, seq.status.value, s.prompt_tokens,
                                   s.generated_tokens, s.ttft_s, s.tokens_per_s))
        return rows
