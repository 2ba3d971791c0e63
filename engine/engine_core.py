"""The synchronous core: one `step()` is one tick, schedule -> run -> post-process.

Only one thread may touch it (the engine thread, or the caller in `Engine.step` mode).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import mlx.nn as nn

from . import cache as kv
from . import kv_memory
from .config import EngineConfig
from .decode_batch import DecodeBatch
from .grammar_planner import GrammarPlanner
from .kv_policy import KvPolicy, open_store
from .model_runner import ModelRunner
from .next_token import PassResult
from .planners import DecodeRows, Planner
from .prefix_cache import PrefixCache, supports
from .sampling import TokenLogprobs
from .scheduler import Scheduler, TickPlan
from .sequence import Sequence, Status
from .speculation import DraftSource, Speculation
from .stats import RequestStats, StatsCollector, TickRecord
from .tick_passes import RowEnds, TickRun
from .token_event import TokenEvent

log = logging.getLogger(__name__)

# Takes a tick's events before the tick ends (EngineCore.step)
HandOver = Callable[[list[TokenEvent]], None]


class EngineCore:
    def __init__(
        self,
        model: nn.Module,
        eos_token_ids: frozenset[int],
        context_length: int,
        config: EngineConfig,
        on_admit: Callable[[Sequence], None] | None = None,
        on_finish: Callable[[Sequence, bool], None] | None = None,
        draft_source: DraftSource | None = None,
        vision: Any = None,
        runner: ModelRunner | None = None,
    ) -> None:
        """`draft_source`: the loaded draft model of speculative="draft:PATH"
        (engine/draft_model.py); None: n-gram drafts, when speculation is on. `runner`:
        another core's model runner to share (engine/warm_up.py); None: one of its own."""
        self.config = config
        self.model = model
        self.vision = vision  # a VLM's image side (engine/vision/prompt.py); None: text only
        self.runner = runner or ModelRunner(
            model, fast_cpu_kernels=config.cpu_kernels, compiled_decode=config.compiled_decode,
            cpu=config.cpu, kv_bits=config.kv_bits, context_length=context_length)
        self.eos_token_ids = eos_token_ids
        self.context_length = context_length
        self.ends = RowEnds(eos_token_ids, context_length)  # where a pass cuts a row's drafts
        self.stats = StatsCollector(config.stats_window_s, config.telemetry_size)
        float_per_token = kv_memory.bytes_per_token(model)
        per_token = (float_per_token if self.runner.packing is None
                     else kv_memory.bytes_per_token(model, self.runner.packing))
        fixed = kv.fixed_state(model)
        # A recurrent state (fixed) cannot be cut back: its entries are reused only whole
        prefix = (PrefixCache(whole_entries=fixed) if config.prefix_cache
                  and supports(kv.new_cache(model)) else None)
        # The disk store keeps plain KV only: a hybrid model's entries stay in memory
        # a LongRoPE model's keys are rotated by the factors chosen for this context
        rope = self.runner.longrope.tag if self.runner.longrope is not None else ""
        store = (open_store(config.kv_disk_dir, model, self.runner.fast_cpu_kernels,
                            config.kv_disk_bytes, self.runner.packing, rope=rope)
                 if prefix is not None and not fixed else None)
        # a recurrent state a sequence, counted in each running request's share
        per_sequence = kv_memory.state_bytes(model) if fixed else 0
        # The default budget is the float KV's memory: quantized KV holds more tokens in it
        # (the point of kv_bits), not the same tokens in less memory.
        budget = kv_memory.choose_budget(config.kv_budget_bytes, model, context_length,
                                         config.max_concurrent, float_per_token, per_sequence)
        self.memory = KvPolicy(budget.nbytes, per_token, context_length, prefix, store,
                               basis=budget.basis, prefix_budget=budget.prefix_nbytes,
                               per_sequence=per_sequence)
        # What this model runs without, and why, in words (Engine.notes)
        self.notes: list[str] = []
        if self.runner.longrope is not None:
            self.notes.append(self.runner.longrope.note)
        if fixed and prefix is not None and config.kv_disk_dir:
            self.notes.append("KV cache across restarts off: the disk store keeps attention "
                              "KV only, not the model's recurrent state (cached prefixes "
                              "stay in memory)")
        # Drafting and checking tokens (engine/speculation.py); None: off. A recurrent
        # state cannot take back refused drafts, so such a model never drafts.
        self.speculative = config.speculative if not fixed else "off"
        if fixed and config.speculative != "off":
            self.notes.append(f"speculative decoding ({config.speculative}) off: the "
                              "model's recurrent layers cannot take back refused drafts")
        self.speculation = (Speculation(config.speculative, config.speculative_max_drafts,
                                        source=draft_source)
                            if self.speculative != "off" else None)
        # Who adds positions to decode rows (engine/planners.py): a grammar's rows first
        # (their forced tokens as drafts; not where refused drafts cannot be taken back: a
        # recurrent state, or a sliding window's cache once it wraps)
        grammar_drafts = (config.speculative_max_drafts if config.grammar_drafts
                          and not fixed and not kv.windowed(model) else 0)
        planners: list[Planner] = [GrammarPlanner(grammar_drafts,
                                                  in_batches=self.runner.shares_passes)]
        if self.speculation is not None:
            planners.append(self.speculation)
        self.scheduler = Scheduler(config, shared_passes=self.runner.shares_passes,
                                   planners=planners)
        memory = self.memory  # (not self: the batch must not keep the core alive)
        self.batch = DecodeBatch(self.runner, context_length, keep_kv=prefix is not None,
                                 batch_run_ahead=config.batch_run_ahead,
                                 drafting=self.scheduler.will_draft,
                                 keep_row=lambda seq, cache, row: memory.keep_row(
                                     seq, cache, row),  # (looked up when called: spies)
                                 room=lambda: memory.free_bytes())
        self.by_id: dict[str, Sequence] = {}  # every unfinished request
        self._on_admit = on_admit or (lambda seq: None)
        self._on_finish = on_finish or (lambda seq, was_active: None)
        self._events: list[TokenEvent] = []
        self._gaps: list[float] = []  # gaps between tokens this tick (stats: stalls)
        # decode rows' steps and the tokens they took (read by readouts: tokens a step)
        self.row_steps = 0
        self.row_tokens = 0

    # -- requests in and out ------------------------------------------------------------
    def add(self, seq: Sequence) -> None:
        prefix = self.memory.prefix
        if seq.share_prompt_with is not None and prefix is not None \
                and not prefix.whole_entries:
            # Waits for that prompt to be cached (Sequence.holds_for_leader); without a
            # prefix cache there is nothing to wait for: it prefills itself. Nor with whole
            # entries: the same prompt needs an entry one token shorter, which is not kept.
            seq.prompt_leader = self.by_id.get(seq.share_prompt_with)
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

    def save_prefix(self, tokens: list[int]) -> int:
        """Save the longest cached prefix of `tokens` to disk (a chat's KV, to outlive a
        restart); how many tokens it holds (0: nothing cached, or no disk store)."""
        return self.memory.save(tokens)

    # -- the tick -----------------------------------------------------------------------
    def step(self, hand_over: HandOver | None = None) -> list[TokenEvent]:
        """One tick, in the order it runs; returns the events not handed over.

        1. Schedule: admissions and the plan (`_schedule`).
        2. The runner's passes (`ModelRunner.execute`): one ragged pass for the decode rows
           and the prompt chunks where it can, else the prompts' passes apart; their
           tokens accepted.
        3. Where the passes ran apart, the rows' step follows them: the prompts they
           finished join the batch (they decode in this step), their first tokens are
           handed over (they do not wait for the step), then `ModelRunner.step_rows`; its
           tokens accepted.
        4. Post-process (`_end_tick`): the tick recorded, its tokens handed over before the
           finished rows' KV is copied out for the prefix cache (~3 ms a row: a burst ending
           together waited ~250 ms for it), those rows leave, and the prompts a shared pass
           finished join the batch (they decode from the next tick).

        `hand_over(events)`, if given, takes the events at those two points in 3 and 4,
        where waiting would cost a client; without it, all are returned.
        """
        if not self.by_id:  # nothing to run; hand out what cancels may have ended
            return self._take_events()
        plan = self._schedule()
        run, results = self.runner.execute(plan, self.batch, self.ends)
        taken = self._take_all(results)
        if not run.rows_done:
            self._join_prefilled()
            if hand_over is not None and len(self.batch) and self._events:
                hand_over(self._take_events())  # first tokens do not wait for the rows' step
            scheduler = self.scheduler
            more_coming = bool(scheduler.prefilling or scheduler.num_waiting)
            taken += self._take_all(self.runner.step_rows(plan, self.batch, self.ends, run,
                                                          more_coming))
        return self._end_tick(plan, run, taken, hand_over)

    # -- schedule -----------------------------------------------------------------------
    def _schedule(self) -> TickPlan:
        """Admit waiting requests while their KV fits (each starts from the longest cached
        prefix of its prompt); the scheduler's plan then says how many positions each
        sequence runs (its budget, the prompt chunks, the decode rows' drafts from its
        planners)."""
        now = time.perf_counter()
        admitted = self.scheduler.admit(self.num_active, self.memory.reserve)
        for seq in admitted:
            seq.t_admit = now
            self._on_admit(seq)
        self.memory.start(admitted, lambda: kv.new_cache(self.model))
        self._see_one()
        batch = self.batch
        plan = self.scheduler.schedule(DecodeRows(
            batch.seqs, batch.has_interactive, batch.interactive_streaming_since,
            started_ahead=batch.ahead is not None, context_length=self.context_length,
            check=lambda planned: self.runner.draft_check(planned, batch)))
        plan.t0 = now
        return plan

    def _see_one(self) -> None:
        """One admitted image request's vision-tower pass, as part of its prefill: its
        prompt's embeddings (none is needed when the prefix cache holds every image token:
        a follow-up about the same image). One a tick, first in line first: the decoding
        rows wait for one pass at a time (two images admitted together stalled them for
        both); the others' prompts wait in prefill meanwhile (Scheduler.plan skips them)."""
        if self.vision is None:  # a text-only model: nothing to see, every tick
            return
        waiting = [s for s in self.scheduler.prefilling if s.awaits_vision]
        if not waiting:
            return
        seq = min(waiting, key=lambda s: (s.priority, s.t_submit))
        try:
            seq.prompt_embeddings = self.vision.embed(seq.vision)
        except Exception as exc:  # noqa: BLE001 - this request fails, the engine goes on
            self._fail(seq, exc)

    # -- post-process -------------------------------------------------------------------
    def _join_prefilled(self) -> None:
        """Prompts now fully in cache start decoding (kept as prefixes first)."""
        self.batch.join(self.memory.keep_prompts(self.scheduler.take_ready()),
                        coming=len(self.scheduler.prefilling))

    def _end_tick(self, plan: TickPlan, run: TickRun, taken: int,
                  hand_over: HandOver | None) -> list[TokenEvent]:
        """After the tick's passes (their `taken` tokens accepted): the tick is recorded,
        its tokens handed over, the rows that finished leave (their KV kept as prefixes),
        and the prompts a shared pass finished join the batch (where the passes ran apart
        they joined before the rows' step, `step`); returns the events not handed over."""
        # Recorded before finished rows leave: copying their KV out for the prefix cache
        # depends on neither the tick's rows nor its prefill, which the budget learns from,
        # and a client that has its reply then finds it counted.
        self._record_tick(plan, run, taken)
        if (hand_over is not None and self._events
                and any(seq.is_finished for seq in self.batch.seqs)):
            hand_over(self._take_events())  # before that copy
        self._drop_finished_rows()
        if run.shared:  # after the finished rows left (the batch is cut once, then grows)
            self._join_prefilled()
        self._count_batch_buffers()
        return self._take_events()

    def _count_batch_buffers(self) -> None:
        """The KV budget learns what the batch's buffers hold beyond their rows'
        set-asides: their padding, which cached prefixes give way to, and their empty rows,
        which admissions wait for and which are cut when cached prefixes kept since took
        their room. Uncounted, the KV in memory passed the budget (791 of 720 MiB at the
        soak's peak; at the window's highest peaks, a row made ahead for a prompt still
        prefilling beside that prompt's own KV and the prefixes kept since; issue #46)."""
        batch, memory = self.batch, self.memory
        if batch.cache is None:
            memory.padding = memory.spare = 0
            return
        padding, empty = batch.beyond_rows()
        if padding != memory.padding:
            memory.padding = padding
            memory.evict()
        room = memory.free_bytes()
        if empty > room:
            batch.cut_empty_rows(room)
            empty = batch.beyond_rows().empty
        # empty rows count while prompts prefill, for whom they were made (they fill them
        # when they join: an admission waits a few ticks at most)
        memory.spare = empty if self.scheduler.prefilling else 0

    def _take_all(self, results: list[PassResult]) -> int:
        """The passes' results accepted in pass order; how many tokens they gave."""
        n = 0
        for result in results:
            self._take(result)
            n += len(result.tokens) + sum(map(len, result.more or []))
        return n

    def _take(self, result: PassResult) -> None:
        """A pass's new tokens, one per sequence, or its error."""
        if result.error is not None:
            for seq in result.seqs:
                self._fail(seq, result.error)
            return
        if result.drafts is not None:
            # how many of each row's drafts held, told its planner before a row that ends
            # forgets them
            for seq, d, rest in zip(result.seqs, result.drafts, result.more or [], strict=True):
                if d:
                    self.scheduler.checked(seq, d, min(len(rest), len(d)))
        now = result.at
        more = result.more or [[]] * len(result.seqs)
        for seq, token, lp, rest in zip(result.seqs, result.tokens, result.logprobs, more,
                                        strict=True):
            decoding = seq.status is Status.DECODING  # (a prompt's first token is not)
            if decoding:  # counted first: a row's stats are taken when it finishes
                seq.decode_steps += 1
                self.row_steps += 1
            before = seq.num_output_tokens
            self._accept(seq, token, now, lp)
            for extra in rest:  # a row's accepted drafts
                if seq.is_finished:
                    break
                self._accept(seq, extra, now)
            if decoding:
                self.row_tokens += max(1, seq.num_output_tokens - before)

    def _accept(self, seq: Sequence, token: int, now: float,
                lp: TokenLogprobs | None = None) -> None:
        """The one place a sequence takes a new token (a prompt's first or a decode row's):
        its text delta, stop checks and, when one holds, its finish. A row with a grammar
        gives the token to its matcher first: one the grammar refuses ends the row with
        an error (never taken as free text)."""
        if seq.matcher is not None:
            problem = seq.matcher.consume(token)
            if problem is not None:
                seq.error = problem
                self._finish(seq, "error")
                return
        seq.output_tokens.append(token)
        if seq.t_first_token is None:
            seq.t_first_token = now
        else:  # the gap since its last token: a stall shows here (recorded with the tick)
            self._gaps.append(now - seq.t_last_token)
        seq.t_last_token = now
        reason = None
        if token in self.eos_token_ids or (seq.matcher is not None
                                           and token in seq.matcher.eos):
            reason, delta = "stop", ""
        else:
            delta = seq.text.add(token)
            if seq.text.stopped or seq.matcher is not None and seq.matcher.stopped:
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
        """The one place a sequence ends (a stop, a limit, a cancel, an error, a shutdown):
        its KV kept or freed, its stats recorded, its final event queued."""
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
        self.scheduler.forget(seq)  # its planners' state (a draft model's KV for the row)
        if cache is not None:
            self.memory.keep_finished(seq, cache)
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

    def _drop_finished_rows(self) -> None:
        # buffers kept for a next batch only where they would stay (below)
        spare_wanted = bool(self.by_id) and self.batch.nbytes <= self.memory.free_bytes()
        self.batch.drop_finished(self.memory.keep_finished, spare_wanted=spare_wanted)
        # The last batch's buffers are kept for the next batch only while they fit in the
        # KV budget's free room: kept while one long reply went on alone, they held 810 MiB
        # beyond a 720 MiB budget after 8 chats x 13 turns (issue #46, docs/memory.md).
        if not self.by_id or self.batch.spare_nbytes > self.memory.free_bytes():
            self.batch.drop_spare()

    def _record_tick(self, plan: TickPlan, run: TickRun, tokens_out: int) -> None:
        t_end = time.perf_counter()
        step_s = t_end - plan.t0
        if run.rows and not plan.prefill:  # what drafts cost, for the planners that weigh it
            self.scheduler.measured(run.rows, run.drafted, step_s)
        self.scheduler.budget.observe(run.rows, run.decode_s, plan.num_prefill_tokens,
                                      run.prefill_s, step_s, plan.interactive,
                                      budgeted=plan.decode_rows > 0 and not plan.beyond_allowance)
        self.stats.record_tick(TickRecord(
            index=self.stats.num_ticks, t=t_end, decode_rows=run.rows,
            prefill_tokens=plan.num_prefill_tokens, prefill_seqs=len(plan.prefill),
            step_s=step_s, forward_s=run.prefill_s + run.forward_s, budget=plan.budget,
            tokens_out=tokens_out, batched=run.batched,
        ), self._gaps)
        self._gaps = []

    def _take_events(self) -> list[TokenEvent]:
        events, self._events = self._events, []
        return events


def _logprobs(lp: TokenLogprobs | None) -> dict[str, object]:
    return {} if lp is None else {"logprob": lp.logprob, "top_logprobs": lp.top}
