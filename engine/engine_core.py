"""The synchronous core: one `step()` is one tick, schedule -> run -> post-process.

Only one thread may touch it (the engine thread, or the caller in `Engine.step` mode).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn

from . import cache as kv
from . import kv_memory
from .config import EngineConfig
from .decode_batch import DecodeBatch, sample_next, wants_kv
from .kv_policy import KvPolicy
from .model_runner import ModelRunner
from .prefix_cache import PrefixCache, alias, supports
from .prefix_store import PrefixStore, fingerprint
from .sampling import TokenLogprobs
from .scheduler import Scheduler, TickPlan, group_prefill
from .sequence import Sequence, Status
from .slot_cache import plain
from .stats import RequestStats, StatsCollector, TickRecord
from .token_event import TokenEvent

log = logging.getLogger(__name__)


class EngineCore:
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
        self.runner = ModelRunner(model, fast_cpu_kernels=config.cpu_kernels,
                                  compiled_decode=config.compiled_decode, cpu=config.cpu)
        self.eos_token_ids = eos_token_ids
        self.context_length = context_length
        self.scheduler = Scheduler(config, shared_passes=self.runner.ragged_ok)
        self.stats = StatsCollector(config.stats_window_s, config.telemetry_size)
        per_token = kv_memory.bytes_per_token(model)
        # Copying a history into a batched prefill and back (2 x its KV) should cost at most
        # half the weight read of the pass it saves.
        self.max_batched_history = kv_memory.weights_bytes(model) // (4 * per_token)
        self.prefix = (PrefixCache() if config.prefix_cache
                       and supports(kv.new_cache(model)) else None)
        self.memory = KvPolicy(config.kv_budget_bytes or kv_memory.default_budget(model),
                               per_token, context_length, self.prefix)
        self.batch = DecodeBatch(self.runner, context_length, keep_kv=self.prefix is not None,
                                 batch_run_ahead=config.batch_run_ahead)
        self.store = None
        if self.prefix is not None and config.kv_disk_dir:
            # The CPU kernels change the last bits of SiLU and softmax, hence of the KV.
            model_id = fingerprint(model, f"cpu_kernels={self.runner.fast_cpu_kernels}")
            try:
                self.store = PrefixStore(Path(config.kv_disk_dir), model_id,
                                         config.kv_disk_bytes)
            except OSError as exc:  # an optional speed-up: the engine runs without it
                log.warning("KV cache across restarts is off: cannot use %s: %s",
                            config.kv_disk_dir, exc)
        self.by_id: dict[str, Sequence] = {}  # every unfinished request
        self._on_admit = on_admit or (lambda seq: None)
        self._on_finish = on_finish or (lambda seq, was_active: None)
        self._events: list[TokenEvent] = []
        self._gaps: list[float] = []  # gaps between tokens this tick (stats: stalls)
        # Set by the engine thread: hands over events before the tick's decode pass, so a
        # first token sampled in prefill does not wait for the other rows' step.
        self.deliver_early: Callable[[list[TokenEvent]], None] | None = None
        self._first_tokens_out = 0  # first tokens sampled in this tick's prefill

    # -- requests in and out ------------------------------------------------------------
    def add(self, seq: Sequence) -> None:
        self.by_id[seq.request_id] = seq
        self.scheduler.add(seq)

    def cancel(self, request_id: str, reason: str = "cancelled") -> None:
        seq = self.by_id.get(request_id)
        if seq is not None and not seq.is_finished:
            self._finish(seq, reason)
            self._drop_finished_rows()

    def abort_all(self, reason: str, error: str | None = None) -> list[TokenEvent]:
        for seq in list(self.by_id.values()):
            seq.error = seq.error or error
            self._finish(seq, reason)
        self._drop_finished_rows()
        return self._take_events()

    @property
    def num_active(self) -> int:
        """Requests prefilling or decoding (not rows that finished this tick)."""
        return len(self.scheduler.prefilling) + len(self.batch.running())

    def has_work(self) -> bool:
        return bool(self.by_id)

    # -- the tick -----------------------------------------------------------------------
    def save_prefix(self, tokens: list[int]) -> int:
        """Save the longest cached prefix of `tokens` to disk (a chat's KV, to outlive a
        restart); how many tokens it holds (0: nothing cached, or no disk store)."""
        if self.prefix is None or self.store is None:
            return 0
        entry, n = self.prefix.longest(list(tokens) + [-1])  # + [-1]: all of them may match
        if entry is None:
            return 0
        self.store.save(entry.tokens[:n], entry.cache)
        return n

    def step(self) -> list[TokenEvent]:
        if not self.by_id:  # nothing to run; hand out what cancels may have ended
            return self._take_events()
        t0 = time.perf_counter()
        self._first_tokens_out = 0
        plan = self._schedule(t0)
        rows, batched = len(self.batch), self.batch.is_batched
        ran = self._run_ragged(plan.prefill) if self._shares_pass(plan) else None
        shared = ran is not None
        if ran is not None:
            # one pass: the rows decoded and the chunks prefilled together; the prompts it
            # finished join the batch once the rows that finished have left (their second
            # token comes next tick)
            tokens, forward_s = ran
            prefill_s = 0.0
            self._postprocess(tokens)
            decode_s = time.perf_counter() - t0
        else:
            prefill_s = self._run_prefill(plan.prefill)
            self.batch.join(self._prefilled(self.scheduler.take_ready()),
                            coming=len(self.scheduler.prefilling))
            rows, batched = len(self.batch), self.batch.is_batched
            if rows and self._events and self.deliver_early is not None:
                self.deliver_early(self._take_events())
            t1 = time.perf_counter()
            tokens, forward_s = self._run_decode() if rows else ([], 0.0)
            self._postprocess(tokens)
            decode_s = time.perf_counter() - t1
        # Recorded before finished rows leave: copying their KV out for the prefix cache
        # depends on neither the tick's rows nor its prefill, which the budget learns from,
        # and a client that has its reply then finds it counted.
        self._record_tick(plan, t0, rows, batched, len(tokens) + self._first_tokens_out,
                          prefill_s, forward_s, decode_s)
        if (self._events and self.deliver_early is not None
                and any(seq.is_finished for seq in self.batch.seqs)):
            # the tick's tokens go out before that copy (~3 ms a row; a burst ending
            # together waited ~250 ms for it)
            self.deliver_early(self._take_events())
        self._drop_finished_rows()
        if shared:
            self.batch.join(self._prefilled(self.scheduler.take_ready()),
                            coming=len(self.scheduler.prefilling))
        return self._take_events()

    def _schedule(self, now: float) -> TickPlan:
        """Admit waiting requests while there is room (each starts from the longest cached
        prefix of its prompt), then split the tick's budget."""
        for seq in self.scheduler.admit(self.num_active, self.memory.reserve):
            seq.t_admit = now
            cache, n = self._restore(seq.prompt_tokens)
            seq.cache = cache if cache is not None else kv.new_cache(self.model)
            seq.num_cached = seq.cached_tokens = n
            self._on_admit(seq)
        self.memory.evict()
        return self.scheduler.plan(len(self.batch), self.batch.has_interactive,
                                   self.batch.interactive_streaming_since)

    def _restore(self, prompt: list[int]) -> tuple[kv.LayerCaches | None, int]:
        """The longest cached prefix of `prompt`, from memory or, when a saved file holds
        more of it, from disk (the file then becomes a memory entry too)."""
        if self.prefix is None:
            return None, 0
        if self.store is not None:
            saved, n = self.store.longest(prompt)
            if saved is not None and n > self.prefix.longest(prompt)[1]:
                cache = self.store.load(saved)
                if cache is not None:
                    self.prefix.insert(saved.tokens.tolist(), cache, compact=False,
                                       source="disk")
        return self.prefix.restore(prompt)

    def _prefilled(self, ready: list[Sequence]) -> list[Sequence]:
        """Prompts now fully in cache are kept as prefixes at once, so requests sharing
        them (a system prompt, a template) reuse them while these still decode."""
        if self.prefix is not None:
            for seq in ready:
                if not seq.is_finished and seq.num_cached > seq.cached_tokens:
                    self.prefix.insert(seq.prompt_tokens, alias(seq.cache), compact=False)
            self.memory.evict()
        return ready

    def _run_prefill(self, chunks: list[tuple[Sequence, int]]) -> float:
        """Run the tick's prefill chunks. A chunk that ends its prompt includes the prompt's
        last token, and the first output token is sampled from that pass's logits (vLLM
        and llama.cpp do the same): a chat's next turn costs one forward pass, not a
        prefill pass and then a decode pass."""
        t = time.perf_counter()
        for group in group_prefill(chunks, max_history=self.max_batched_history):
            pieces = [seq.prompt_tokens[seq.num_cached : seq.num_cached + n] for seq, n in group]
            last = [seq.num_cached + n == seq.num_prompt_tokens for seq, n in group]
            try:
                if len(group) == 1:
                    logits = self.runner.prefill(group[0][0].cache, pieces[0], logits=last[0])
                else:
                    caches, logits = self.runner.prefill_many(
                        [seq.cache for seq, _ in group], pieces, logits=last)
                    for (seq, _), cache in zip(group, caches, strict=True):
                        seq.cache = cache
                for seq, n in group:
                    seq.num_cached += n
                if logits is not None:
                    self._first_tokens([seq for (seq, _), done in zip(group, last, strict=True)
                                        if done], logits)
            except Exception as exc:  # noqa: BLE001 - these requests fail, the engine goes on
                for seq, _ in group:
                    self._fail(seq, exc)
        return time.perf_counter() - t

    def _shares_pass(self, plan: TickPlan) -> bool:
        """Whether this tick runs as one ragged pass: the model allows it, and it has
        chunks to prefill beside decode rows, or several chunks (no padding, no history
        copied into a batch), every one with a plain cache."""
        if not (self.runner.ragged_ok and plan.prefill):
            return False
        if len(self.batch) and not self.batch.can_share_pass():
            return False
        if not len(self.batch) and len(plan.prefill) < 2:
            return False
        return all(plain(seq.cache) for seq, _ in plan.prefill)

    def _run_ragged(self, chunks: list[tuple[Sequence, int]]
                    ) -> tuple[list[int], float] | None:
        """The tick's decode rows and prefill chunks in one forward pass
        (engine/ragged_pass.py); (the rows' tokens, seconds), or None when the pass failed
        and left every cache as it was (the tick then runs its passes apart, where an
        error fails only the requests of its pass). A chunk that ends its prompt gives the
        prompt's first token, as in `_run_prefill`."""
        t = time.perf_counter()
        rows = list(self.batch.seqs)
        pieces = [seq.prompt_tokens[seq.num_cached : seq.num_cached + n] for seq, n in chunks]
        last = [seq.num_cached + n == seq.num_prompt_tokens for seq, n in chunks]
        cache, inputs = self.batch.step_inputs() if rows else (None, [])
        try:
            row_logits, first_logits = self.runner.ragged(
                cache, inputs, [(seq.cache, piece) for (seq, _), piece
                                in zip(chunks, pieces, strict=True)], last)
        except Exception as exc:  # noqa: BLE001 - retried as separate passes
            log.warning("a shared pass failed (%s: %s); running the tick's passes apart",
                        type(exc).__name__, exc)
            return None
        for seq, n in chunks:
            seq.num_cached += n
        if first_logits is not None:
            self._first_tokens([seq for (seq, _), done in zip(chunks, last, strict=True)
                                if done], first_logits)
        try:
            tokens = self.batch.sample(row_logits).tolist() if rows else []
        except Exception as exc:  # noqa: BLE001 - the rows fail, the engine goes on
            for seq in rows:
                self._fail(seq, exc)
            tokens = []
        return tokens, time.perf_counter() - t

    def _first_tokens(self, seqs: list[Sequence], logits: mx.array) -> None:
        """Sample each prompt's first token from its last prompt position's logits."""
        picked, lps = sample_next(seqs, logits)
        lps = lps or [None] * len(seqs)
        now = time.perf_counter()
        self._first_tokens_out += len(seqs)
        for seq, token, lp in zip(seqs, picked.tolist(), lps, strict=True):
            self._accept(seq, token, now, lp)

    def _run_decode(self) -> tuple[list[int], float]:
        """One token per decoding row; (tokens, seconds of forward pass + sampling)."""
        t = time.perf_counter()
        more_coming = bool(self.scheduler.prefilling or self.scheduler.num_waiting)
        try:
            tokens = self.batch.step(more_coming)
        except Exception as exc:  # noqa: BLE001 - the tick's requests fail, the engine goes on
            for seq in self.batch.seqs:
                self._fail(seq, exc)
            tokens = []
        return tokens, time.perf_counter() - t

    # -- post-processing ----------------------------------------------------------------
    def _postprocess(self, tokens: list[int]) -> None:
        """Each row's new token: text delta, stop checks, finishes (rows leave afterwards)."""
        if not tokens:  # nothing decoded, or the step failed (its rows are finished)
            return
        now = time.perf_counter()
        logprobs = self.batch.logprobs or [None] * len(tokens)
        for seq, token, lp in zip(self.batch.seqs, tokens, logprobs, strict=True):
            self._accept(seq, token, now, lp)

    def _accept(self, seq: Sequence, token: int, now: float,
                lp: TokenLogprobs | None = None) -> None:
        seq.output_tokens.append(token)
        if seq.t_first_token is None:
            seq.t_first_token = now
        else:  # the gap since its last token: a stall shows here (recorded with the tick)
            self._gaps.append(now - seq.t_last_token)
        seq.t_last_token = now
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
            self._events.append(TokenEvent(seq.request_id, token, delta, **_logprobs(lp)))
        else:
            self._finish(seq, reason, token=token, delta=delta, lp=lp)

    def _fail(self, seq: Sequence, exc: BaseException) -> None:
        seq.error = f"{type(exc).__name__}: {exc}"
        self._finish(seq, "error")

    def _finish(self, seq: Sequence, reason: str, token: int | None = None,
                delta: str = "", lp: TokenLogprobs | None = None) -> None:
        if seq.is_finished:
            return
        if seq.status in (Status.WAITING, Status.PREFILLING):
            self.scheduler.remove(seq)
        was_active = seq.status in (Status.PREFILLING, Status.DECODING)
        seq.status = Status.FINISHED
        seq.finish_reason = reason
        seq.t_finish = time.perf_counter()
        delta += seq.text.finish()
        cache = self.batch.release(seq)
        if cache is not None:
            self._keep_kv(seq, cache)
        if was_active:
            self.memory.release(seq)
        del self.by_id[seq.request_id]
        stats = RequestStats.of(seq)
        self.stats.record_finish(stats)
        self._on_finish(seq, was_active)
        self._events.append(
            TokenEvent(seq.request_id, token, delta, reason, error=seq.error, stats=stats,
                       **_logprobs(lp))
        )

    def _keep_kv(self, seq: Sequence, cache: kv.LayerCaches) -> None:
        """A finished request's KV (prompt and every token fed after it) becomes a prefix
        for later requests."""
        if self.prefix is not None and wants_kv(seq):
            self.prefix.insert(seq.prompt_tokens + seq.output_tokens, cache)
            self.memory.evict()

    def _drop_finished_rows(self) -> None:
        for seq, cache in self.batch.drop_finished():
            self._keep_kv(seq, cache)
        if not self.by_id:
            self.batch.drop_spare()

    def _record_tick(self, plan: TickPlan, t0: float, rows: int, batched: bool, tokens_out: int,
                     prefill_s: float, forward_s: float, decode_s: float) -> None:
        t_end = time.perf_counter()
        step_s = t_end - t0
        self.scheduler.budget.observe(rows, decode_s, plan.num_prefill_tokens, prefill_s, step_s,
                                      plan.interactive,
                                      budgeted=plan.decode_rows > 0 and not plan.beyond_allowance)
        self.stats.record_tick(TickRecord(
            index=self.stats.num_ticks, t=t_end, decode_rows=rows,
            prefill_tokens=plan.num_prefill_tokens, prefill_seqs=len(plan.prefill),
            step_s=step_s, forward_s=prefill_s + forward_s, budget=plan.budget,
            tokens_out=tokens_out, batched=batched,
        ), self._gaps)
        self._gaps = []

    def _take_events(self) -> list[TokenEvent]:
        events, self._events = self._events, []
        return events


def _logprobs(lp: TokenLogprobs | None) -> dict[str, object]:
    return {} if lp is None else {"logprob": lp.logprob, "top_logprobs": lp.top}
