"""The synchronous core: one `step()` is one tick, schedule -> run -> post-process.

Only one thread may touch it (the engine thread, or the caller in `Engine.step` mode).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn

from . import cache as kv
from . import kv_memory
from .config import EngineConfig
from .decode_batch import DecodeBatch
from .kv_policy import KvPolicy, open_store
from .model_runner import ModelRunner
from .next_token import PassResult, sample_drafted, sample_pass
from .prefix_cache import PrefixCache, supports
from .sampling import TokenLogprobs
from .scheduler import Scheduler, TickPlan, group_prefill
from .sequence import Sequence, Status
from .slot_cache import plain
from .speculation import DraftSource, Speculation
from .stats import RequestStats, StatsCollector, TickRecord
from .token_event import TokenEvent

log = logging.getLogger(__name__)

# Takes a tick's events before the tick ends (EngineCore.step)
HandOver = Callable[[list[TokenEvent]], None]


@dataclass(slots=True)
class Tick:
    """One tick's plan and what its passes measured (for the budget and the telemetry)."""

    plan: TickPlan
    t0: float  # when it started
    rows: int = 0  # decode rows in its step
    batched: bool = False  # they ran as a batch cache
    shared: bool = False  # the rows and the chunks ran in one pass
    prefill_s: float = 0.0  # prefill passes apart from the step, first tokens accepted
    forward_s: float = 0.0  # the step's pass and sampling (a shared pass: all of it)
    decode_s: float = 0.0  # the step, its tokens accepted (a shared pass: since t0)
    tokens_out: int = 0  # tokens accepted: first tokens and the rows' ones
    drafted: int = 0  # drafted positions its step checked (engine/speculation.py)


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
    ) -> None:
        """`draft_source`: the loaded draft model of speculative="draft:PATH"
        (engine/draft_model.py); None: n-gram drafts, when speculation is on."""
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
        fixed = kv.fixed_state(model)
        # A recurrent state (fixed) cannot be cut back: its entries are reused only whole
        prefix = (PrefixCache(whole_entries=fixed) if config.prefix_cache
                  and supports(kv.new_cache(model)) else None)
        # The disk store keeps plain KV only: a hybrid model's entries stay in memory
        store = (open_store(config.kv_disk_dir, model, self.runner.fast_cpu_kernels,
                            config.kv_disk_bytes) if prefix is not None and not fixed else None)
        # a recurrent state a sequence, counted in each running request's share
        per_sequence = kv_memory.state_bytes(model) if fixed else 0
        budget = kv_memory.choose_budget(config.kv_budget_bytes, model, context_length,
                                         config.max_concurrent, per_token, per_sequence)
        self.memory = KvPolicy(budget.nbytes, per_token, context_length, prefix, store,
                               basis=budget.basis, prefix_budget=budget.prefix_nbytes,
                               per_sequence=per_sequence)
        # What this model runs without, and why, in words (Engine.notes)
        self.notes: list[str] = []
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
        self.batch = DecodeBatch(self.runner, context_length, keep_kv=prefix is not None,
                                 batch_run_ahead=config.batch_run_ahead,
                                 drafting=(self.speculation.will_draft
                                           if self.speculation is not None else None))
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
        """One tick: schedule -> run -> post-process; returns its events.

        `hand_over(events)`, if given, takes events before the tick ends, at the two points
        where waiting would cost a client: a prompt's first token, sampled in prefill, goes
        before the tick's decode step (it does not wait for the other rows' step), and the
        tick's tokens go before finished rows' KV is copied out for the prefix cache (~3 ms
        a row: a burst ending together waited ~250 ms for it). Without it, all are returned.
        """
        if not self.by_id:  # nothing to run; hand out what cancels may have ended
            return self._take_events()
        tick = self._schedule()
        passes = self._run(tick, hand_over)
        return self._postprocess(tick, passes, hand_over)

    # -- schedule -----------------------------------------------------------------------
    def _schedule(self) -> Tick:
        """Admit waiting requests while their KV fits (each starts from the longest cached
        prefix of its prompt), then split the tick's budget."""
        now = time.perf_counter()
        admitted = self.scheduler.admit(self.num_active, self.memory.reserve)
        for seq in admitted:
            seq.t_admit = now
            self._on_admit(seq)
        self.memory.start(admitted, lambda: kv.new_cache(self.model))
        return Tick(self.scheduler.plan(len(self.batch), self.batch.has_interactive,
                                        self.batch.interactive_streaming_since), now)

    # -- run ----------------------------------------------------------------------------
    def _run(self, tick: Tick, hand_over: HandOver | None) -> Iterator[PassResult]:
        """The tick's forward passes, one at a time: each yields what it sampled and goes on
        once that is post-processed (a prompt's first token is its first decode input). One
        shared pass for decode rows and prefill chunks where it can; otherwise the prefill
        passes, then the decode step, which the prompts they finished join (their first
        tokens handed over before it)."""
        plan = tick.plan
        tick.rows, tick.batched = len(self.batch), self.batch.is_batched
        drafts = self._plan_drafts(plan)
        tick.drafted = sum(len(d) for d in drafts.values())
        if self._shares_pass(plan) or (drafts and self.batch.is_batched
                                       and self.runner.ragged_ok):
            t = time.perf_counter()
            ran = self._run_shared(plan.prefill, drafts)
            if ran is not None:  # else every cache is as it was: the passes run apart
                tick.shared = bool(plan.prefill)
                rows, row_logits, firsts, first_logits = ran
                if first_logits is not None:
                    yield sample_pass(firsts, first_logits)
                try:
                    if not rows:
                        decoded = None
                    elif drafts:
                        decoded = self._checked(rows, drafts, row_logits)
                    else:
                        decoded = sample_pass(rows, row_logits)
                except Exception as exc:  # noqa: BLE001 - the rows fail, the engine goes on
                    decoded = PassResult.failed(rows, exc)
                tick.forward_s = time.perf_counter() - t
                if decoded is not None:
                    yield decoded
                tick.decode_s = time.perf_counter() - tick.t0
                return
        yield from self._run_prefill(plan.prefill, tick)
        self._join_prefilled()
        tick.rows, tick.batched = len(self.batch), self.batch.is_batched
        if hand_over is not None and tick.rows and self._events:
            hand_over(self._take_events())  # first tokens do not wait for the rows' step
        t = time.perf_counter()
        if tick.rows:
            # drafts were planned for the rows before the prefill passes: a lone row that
            # was already decoding checks them here, or a batch without the ragged pass
            # in a tick without prefill (engine/speculation.py)
            lone = self.batch.seqs[0]  # (unbatched: the one row)
            if 0 in drafts and not self.batch.is_batched and lone.status is Status.DECODING:
                yield self._run_checked_alone(tick, lone, drafts[0])
            elif drafts and self._rows_verify_apart(plan):
                yield self._run_checked_rows(tick, drafts)
            else:
                tick.drafted = 0
                yield self._run_decode(tick)
        tick.decode_s = time.perf_counter() - t

    def _run_prefill(self, chunks: list[tuple[Sequence, int]],
                     tick: Tick) -> Iterator[PassResult]:
        """The tick's prefill chunks, in passes apart from the decode step. A chunk that
        ends its prompt includes the prompt's last token, and the first output token is
        sampled from that pass's logits (vLLM and llama.cpp do the same): a chat's next
        turn costs one forward pass, not a prefill pass and then a decode pass."""
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
                firsts = [seq for (seq, _), done in zip(group, last, strict=True) if done]
                result = sample_pass(firsts, logits) if logits is not None else None
            except Exception as exc:  # noqa: BLE001 - these requests fail, the engine goes on
                result = PassResult.failed([seq for seq, _ in group], exc)
            if result is not None:
                yield result
        tick.prefill_s = time.perf_counter() - t

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

    def _run_shared(self, chunks: list[tuple[Sequence, int]],
                    drafts: dict[int, list[int]] | None = None,
                    ) -> tuple[list[Sequence], mx.array | None, list[Sequence],
                               mx.array | None] | None:
        """The tick's decode rows and prefill chunks in one forward pass
        (engine/ragged_pass.py): (the rows, their logits, the prompts it finished, their
        last position's logits), or None when the pass failed and left every cache as it
        was (the tick then runs its passes apart, where an error fails only the requests
        of its pass). A chunk that ends its prompt gives the prompt's first token, as in
        `_run_prefill`."""
        rows = list(self.batch.seqs)
        pieces = [seq.prompt_tokens[seq.num_cached : seq.num_cached + n] for seq, n in chunks]
        last = [seq.num_cached + n == seq.num_prompt_tokens for seq, n in chunks]
        cache, inputs = self.batch.step_inputs() if rows else (None, [])
        row_drafts = ([drafts.get(i, []) for i in range(len(rows))] if drafts else None)
        try:
            row_logits, first_logits = self.runner.ragged(
                cache, inputs, [(seq.cache, piece) for (seq, _), piece
                                in zip(chunks, pieces, strict=True)], last, row_drafts)
        except Exception as exc:  # noqa: BLE001 - retried as separate passes
            log.warning("a shared pass failed (%s: %s); running the tick's passes apart",
                        type(exc).__name__, exc)
            return None
        for seq, n in chunks:
            seq.num_cached += n
        firsts = [seq for (seq, _), done in zip(chunks, last, strict=True) if done]
        return rows, row_logits, firsts, first_logits

    # -- speculation (engine/speculation.py) -------------------------------------------------
    def _plan_drafts(self, plan: TickPlan) -> dict[int, list[int]]:
        """This tick's drafts by decode row: none without speculation or with a step started
        ahead (it is used as it is). A batch checks its drafts in the ragged pass (the CPU's
        native kernels) or, without one, in a pass of its own where every row has as many
        positions as the one with most drafts (a GPU's batch: `_run_checked_rows`)."""
        batch = self.batch
        if self.speculation is None or not len(batch):
            return {}
        if batch.ahead is not None:
            self.speculation.skip(batch.seqs)
            return {}
        uniform = False
        if batch.is_batched and not (self.runner.ragged_ok and batch.can_share_pass()):
            if not self._rows_verify_apart(plan):
                return {}
            uniform = True
        if not batch.is_batched and plan.prefill and not self._shares_pass(plan):
            return {}  # the prefill passes run first; the lone row steps after them plainly
        return self.speculation.plan(batch.seqs, self.context_length,
                                     can_measure=not plan.prefill, uniform=uniform)

    def _rows_verify_apart(self, plan: TickPlan) -> bool:
        """Whether this tick's batch checks drafts in a pass of its own: it cannot share the
        ragged pass, its KV is slot rows, and no prefill pass runs before its step (the
        prompts it finishes would join the batch first)."""
        return (self.batch.is_batched and not self.runner.ragged_ok and not plan.prefill
                and self.batch.can_verify_rows())

    def _checked(self, seqs: list[Sequence], drafts: dict[int, list[int]],
                 logits: mx.array) -> PassResult:
        """The tokens each row takes from a pass that checked drafts; the KV of drafts not
        taken is taken back before anyone reads it."""
        row_drafts = [drafts.get(i, []) for i in range(len(seqs))]
        taken, logprobs = sample_drafted(seqs, row_drafts, logits)
        taken = [self._until_end(seq, tokens) for seq, tokens in zip(seqs, taken, strict=True)]
        for row, (seq, d, tokens) in enumerate(zip(seqs, row_drafts, taken, strict=True)):
            if not d:
                continue
            self.speculation.checked(seq, d, min(len(tokens) - 1, len(d)))
            refused = len(d) + 1 - len(tokens)
            if refused:
                self.batch.take_back(row, refused)
        return PassResult(list(seqs), [t[0] for t in taken], logprobs,
                          more=[t[1:] for t in taken])

    def _until_end(self, seq: Sequence, tokens: list[int]) -> list[int]:
        """`tokens` cut where the row will end anyway: its first end-of-sequence token, its
        max_tokens, the context (its KV then matches what it took)."""
        room = min(seq.params.max_tokens - seq.num_output_tokens,
                   self.context_length - seq.num_tokens)
        tokens = tokens[:max(1, room)]
        for i, token in enumerate(tokens):
            if token in self.eos_token_ids:
                return tokens[:i + 1]
        return tokens

    def _run_checked_alone(self, tick: Tick, seq: Sequence, drafts: list[int]) -> PassResult:
        """A lone row's input and drafts in one pass (any backend)."""
        t = time.perf_counter()
        try:
            logits = self.batch.verify_alone(drafts)
            result = self._checked([seq], {0: drafts}, logits)
        except Exception as exc:  # noqa: BLE001 - the row fails, the engine goes on
            result = PassResult.failed([seq], exc)
        tick.forward_s = time.perf_counter() - t
        return result

    def _run_checked_rows(self, tick: Tick, drafts: dict[int, list[int]]) -> PassResult:
        """A batch's inputs and drafts in one pass of its own, rows padded to the most
        drafts (`DecodeBatch.verify_rows`); every computed position counts as drafted (the
        padding costs as much as a draft, and the costs learn what a position costs)."""
        t = time.perf_counter()
        seqs = list(self.batch.seqs)
        row_drafts = [drafts.get(i, []) for i in range(len(seqs))]
        tick.drafted = len(seqs) * max(map(len, row_drafts))
        try:
            logits = self.batch.verify_rows(row_drafts)
            result = self._checked(seqs, drafts, logits)
        except Exception as exc:  # noqa: BLE001 - the rows fail, the engine goes on
            result = PassResult.failed(seqs, exc)
        tick.forward_s = time.perf_counter() - t
        return result

    def _run_decode(self, tick: Tick) -> PassResult:
        """One token per decoding row (forward pass + sampling)."""
        t = time.perf_counter()
        more_coming = bool(self.scheduler.prefilling or self.scheduler.num_waiting)
        try:
            result = self.batch.step(more_coming)
        except Exception as exc:  # noqa: BLE001 - the tick's requests fail, the engine goes on
            result = PassResult.failed(self.batch.seqs, exc)
        tick.forward_s = time.perf_counter() - t
        return result

    def _join_prefilled(self) -> None:
        """Prompts now fully in cache start decoding (kept as prefixes first)."""
        self.batch.join(self.memory.keep_prompts(self.scheduler.take_ready()),
                        coming=len(self.scheduler.prefilling))

    # -- post-process -------------------------------------------------------------------
    def _postprocess(self, tick: Tick, passes: Iterator[PassResult],
                     hand_over: HandOver | None) -> list[TokenEvent]:
        """Each pass's result as the pass ends: its tokens accepted, or its error failing its
        sequences. Then the tick is recorded, its tokens handed over, the rows that finished
        leave (their KV kept as prefixes) and the prompts a shared pass finished join the
        batch (their second token comes next tick); returns the events not handed over."""
        for result in passes:
            self._take(result)
            tick.tokens_out += len(result.tokens) + sum(map(len, result.more or []))
        # Recorded before finished rows leave: copying their KV out for the prefix cache
        # depends on neither the tick's rows nor its prefill, which the budget learns from,
        # and a client that has its reply then finds it counted.
        self._record_tick(tick)
        if (hand_over is not None and self._events
                and any(seq.is_finished for seq in self.batch.seqs)):
            hand_over(self._take_events())  # before that copy
        self._drop_finished_rows()
        if tick.shared:
            self._join_prefilled()
        return self._take_events()

    def _take(self, result: PassResult) -> None:
        """A pass's new tokens, one per sequence, or its error."""
        if result.error is not None:
            for seq in result.seqs:
                self._fail(seq, result.error)
            return
        now = time.perf_counter()
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
        if self.speculation is not None:
            self.speculation.forget(seq)  # a draft model's KV for the row goes now
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
        for seq, cache in self.batch.drop_finished():
            self.memory.keep_finished(seq, cache)
        # The last batch's buffers are kept for the next batch only while they fit in the
        # KV budget's free room: kept while one long reply went on alone, they held 810 MiB
        # beyond a 720 MiB budget after 8 chats x 13 turns (issue #46, docs/memory.md).
        if not self.by_id or self.batch.spare_nbytes > self.memory.free_bytes():
            self.batch.drop_spare()

    def _record_tick(self, tick: Tick) -> None:
        t_end = time.perf_counter()
        step_s, plan = t_end - tick.t0, tick.plan
        if self.speculation is not None and tick.rows and not plan.prefill:
            if tick.drafted:
                self.speculation.costs.observe_checked(tick.rows, tick.drafted, step_s)
            else:
                self.speculation.costs.observe_plain(tick.rows, step_s,
                                                     self.speculation.max_drafts)
        self.scheduler.budget.observe(tick.rows, tick.decode_s, plan.num_prefill_tokens,
                                      tick.prefill_s, step_s, plan.interactive,
                                      budgeted=plan.decode_rows > 0 and not plan.beyond_allowance)
        self.stats.record_tick(TickRecord(
            index=self.stats.num_ticks, t=t_end, decode_rows=tick.rows,
            prefill_tokens=plan.num_prefill_tokens, prefill_seqs=len(plan.prefill),
            step_s=step_s, forward_s=tick.prefill_s + tick.forward_s, budget=plan.budget,
            tokens_out=tick.tokens_out, batched=tick.batched,
        ), self._gaps)
        self._gaps = []

    def _take_events(self) -> list[TokenEvent]:
        events, self._events = self._events, []
        return events


def _logprobs(lp: TokenLogprobs | None) -> dict[str, object]:
    return {} if lp is None else {"logprob": lp.logprob, "top_logprobs": lp.top}
