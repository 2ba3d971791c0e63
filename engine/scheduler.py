"""The tick policy: who waits, who prefills how much, and the adaptive token budget.

Pure Python (no MLX): decode rows come first, one token each; the rest of the budget goes to
chunked prefill, interactive before background, then first come first served, each prompt at
most `prefill_burst` tokens a tick. The budget follows measured step times (EWMA) so a tick
stays near its target and a long prompt never freezes an interactive decoder.

Prompts that arrived together are prefilled together: one submitted before the first token
of every interactive stream now decoding (a burst's members, when the first of them already
stream) is not held to the allowance. Spreading a burst's prefill over many small ticks
stalled every stream that had started in each of them: 16 chats opened at once gave ~6 % of
their inter-token gaps at ~300 ms (the ITL p99); prefilled together, a few streams wait once.

The decode rows' drafts (1 + k positions for a row that checks k) are its planners' to say
(engine/planners.py): `Scheduler.schedule` gives each row to the first planner that owns it
(a grammar's rows, then speculation's) and asks each for its rows' drafts.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .config import EngineConfig
from .planners import DecodeRows, Planner, RowsTick
from .sequence import Priority, Sequence, Status


@dataclass(slots=True)
class TickPlan:
    """What a tick runs: how many positions each sequence gets (`positions`): a prompt
    chunk, 1 for a decode row, 1 + k for a row that checks k drafts. How the passes run is
    the runner's choice (`ModelRunner.execute`)."""

    budget: int  # tokens this tick may run: decode rows + prefill
    decode_rows: int  # sequences decoding when the tick was planned
    interactive: bool  # an interactive sequence is among them (its ITL is protected)
    prefill: list[tuple[Sequence, int]]  # (sequence, prompt tokens to run now)
    beyond_allowance: bool = False  # short prompts or a burst's were run past the allowance
    # Set by `Scheduler.schedule` once the planners were asked (engine/planners.py):
    rows: list[Sequence] = field(default_factory=list)  # the decode rows, in batch order
    drafts: dict[int, list[int]] = field(default_factory=dict)  # by row (the planners')
    t0: float = 0.0  # when the tick began (perf_counter)

    @property
    def num_prefill_tokens(self) -> int:
        return sum(n for _, n in self.prefill)

    @property
    def num_drafted(self) -> int:
        return sum(len(d) for d in self.drafts.values())

    def positions(self) -> list[tuple[Sequence, int]]:
        """Each sequence's positions this tick: decode rows (1 + their drafts), then the
        prompt chunks. Prompts that a prefill pass finishes may also decode once this tick
        where the runner steps the rows after those passes (they join first)."""
        return ([(seq, 1 + len(self.drafts.get(i, []))) for i, seq in enumerate(self.rows)]
                + list(self.prefill))


class BudgetController:
    """Tokens per tick, steered by measured tick times (EWMA) against a target.

    While an interactive sequence decodes, a tick should take about `max(target_step_s,
    decode_slack x a decode-only tick)`: a chat's stream stays smooth. While only background
    sequences decode (simulations, batch jobs), the limit is `background_slack` x instead:
    prompts get much larger slices, which is what throughput wants. Each class has its own
    allowance, scaled by target / measured after every tick that prefilled, so fixed
    per-forward costs are learnt rather than modelled. With nobody decoding, prefill runs at
    full size.
    """

    def __init__(self, config: EngineConfig, shared_passes: bool = False) -> None:
        self.config = config
        # A tick's rows and chunks run in one pass (engine/ragged_pass.py): a chunk costs
        # only its tokens, so interactive ticks aim at `shared_slack` x a decode-only tick
        # and the allowance starts at the least it can be (it grows when ticks allow).
        self.shared_passes = shared_passes
        self.decode_s: float | None = None  # EWMA of decode-only ticks
        self.token_s: float | None = None  # EWMA of a prefill token's cost beside decode rows
        self.step_s: float = 0.0  # EWMA of all ticks
        # the least prefill a tick while decoding: prefill always progresses
        self.floor = {True: (min(config.shared_min_prefill_tokens, config.min_prefill_tokens)
                             if shared_passes else config.min_prefill_tokens),
                      False: config.min_prefill_tokens}
        # prefill tokens per tick while decoding, per class of the decoders (interactive?)
        self.allowance = {True: (1.0 if shared_passes else 4.0) * self.floor[True],
                          False: float(config.max_token_budget)}
        self.last_budget = config.max_token_budget

    def _ewma(self, old: float | None, new: float) -> float:
        a = self.config.ewma_alpha
        return new if old is None else a * new + (1 - a) * old

    @property
    def target_s(self) -> float:
        return self.target_for(interactive=True)

    def target_for(self, interactive: bool) -> float:
        cfg = self.config
        if interactive and self.shared_passes and self.decode_s is not None:
            return cfg.shared_slack * self.decode_s
        slack = cfg.decode_slack if interactive else cfg.background_slack
        return max(cfg.target_step_s, slack * (self.decode_s or 0.0))

    def observe(self, decode_rows: int, decode_s: float, prefill_tokens: int, prefill_s: float,
                step_s: float, interactive: bool = True, budgeted: bool = True) -> None:
        """`budgeted`: the tick's prefill was planned under the allowance (someone was
        decoding at plan time). The first tick of a burst runs at full room instead, and its
        length says nothing about the allowance: left alone, it shrank the allowance after
        every burst until prompts crawled in at the minimum."""
        self.step_s = self._ewma(self.step_s if self.step_s else None, step_s)
        if not decode_rows:
            return
        if not prefill_tokens:
            self.decode_s = self._ewma(self.decode_s, step_s)
            return
        if self.shared_passes and self.decode_s is not None and prefill_tokens >= 8:
            self.token_s = self._ewma(self.token_s,
                                      max(0.0, step_s - self.decode_s) / prefill_tokens)
        if not budgeted:
            return
        # Grow only when the allowance was used up: an idle allowance says nothing.
        allow = self.allowance[interactive]
        factor = self.target_for(interactive) / step_s
        if factor < 1.0 or prefill_tokens >= 0.9 * allow:
            factor = min(2.0, max(0.5, factor)) ** self.config.ewma_alpha
            cfg = self.config
            self.allowance[interactive] = min(float(cfg.max_token_budget),
                                              max(float(self.floor[interactive]), allow * factor))

    def pace(self, tokens: int) -> int:
        """The chunk that holds a `tokens`-long prompt's first token back by about
        `prefill_delay_s` in all, beside interactive rows in shared passes: it then takes
        ~delay / decode tick ticks. Never more than fits a `target_step_s` tick (0: no pace,
        as when passes are apart, where ticks already aim at target_step_s)."""
        if not self.shared_passes or self.decode_s is None or self.token_s is None:
            return 0
        cfg = self.config
        want = math.ceil(tokens * self.decode_s / cfg.prefill_delay_s)
        fits = (cfg.target_step_s - self.decode_s) / max(self.token_s, 1e-9)
        return max(0, min(want, int(fits)))

    def budget(self, decode_rows: int, interactive: bool = True) -> int:
        cfg = self.config
        room = cfg.max_token_budget - decode_rows
        allow = room if decode_rows == 0 else round(self.allowance[interactive])
        allow = max(self.floor[interactive], min(allow, room))
        self.last_budget = decode_rows + allow
        return self.last_budget


class Scheduler:
    """Waiting queues per priority class, the prefilling set, and the decode rows' planners."""

    def __init__(self, config: EngineConfig, shared_passes: bool = False,
                 planners: list[Planner] | None = None) -> None:
        """`planners`: who adds positions to decode rows, in order (a row is the first
        owner's; engine/planners.py)."""
        self.config = config
        self.waiting: dict[Priority, deque[Sequence]] = {p: deque() for p in Priority}
        self.prefilling: list[Sequence] = []
        self.budget = BudgetController(config, shared_passes)
        self.planners: list[Planner] = list(planners or [])

    @staticmethod
    def is_next_turn(seq: Sequence) -> bool:
        """`seq` came with more of its prompt in the prefix cache than it has left to run
        (a chat's next turn): a short chunk after a long history, which costs about a pass
        whether it runs alone or batched (its history copied in and out). A prompt whose
        history is its own earlier chunk (a burst split by the budget) is not one."""
        return 0 < seq.num_prefill_left <= seq.cached_tokens

    @property
    def num_waiting(self) -> int:
        return sum(len(q) for q in self.waiting.values())

    def add(self, seq: Sequence) -> None:
        seq.status = Status.WAITING
        self.waiting[seq.priority].append(seq)

    def remove(self, seq: Sequence) -> None:
        """Forget a sequence that is waiting or prefilling (cancelled or failed). One that
        was taken as ready but had not joined the decode batch when a tick failed is in
        neither list."""
        queue = (self.waiting[seq.priority] if seq.status is Status.WAITING
                 else self.prefilling if seq.status is Status.PREFILLING else [])
        if seq in queue:
            queue.remove(seq)

    def admit(self, num_active: int,
              reserve: Callable[[Sequence], bool] = lambda seq: True) -> list[Sequence]:
        """Move waiting sequences into prefill while there is room, highest class first.
        `reserve(seq)` sets its KV memory aside, or says False when it does not fit now:
        then it waits, and so does everyone behind it (no one overtakes it, so it cannot
        starve). One that shares a leader's prompt still being prefilled is passed over and
        keeps its place: it is admitted, ahead of those behind it, once that prompt is
        cached (a few ticks), and then computes only what the cache lacks."""
        admitted = []
        for priority in Priority:
            queue = self.waiting[priority]
            held: list[Sequence] = []  # waiting for a leader's prompt: they keep their place
            while queue and num_active + len(admitted) < self.config.max_concurrent:
                if queue[0].holds_for_leader:
                    held.append(queue.popleft())
                    continue
                if not reserve(queue[0]):
                    queue.extendleft(reversed(held))
                    self.prefilling.extend(admitted)
                    return admitted
                seq = queue.popleft()
                seq.status = Status.PREFILLING
                admitted.append(seq)
            queue.extendleft(reversed(held))
        self.prefilling.extend(admitted)
        return admitted

    def plan(self, decode_rows: int, interactive: bool = True,
             streaming_since: float | None = None) -> TickPlan:
        """`interactive`: an interactive sequence is among the decoders (protect its ITL).
        Prompts go in priority, then arrival order; one whose rest is short
        (`whole_prompt_tokens`) is finished now even past the allowance, within that
        many tokens a tick. `streaming_since`: the first token of the longest-running
        interactive decoder; a prompt submitted before it came in their burst and runs at
        full size (None: no burst rule). While interactive rows decode, a prompt that runs
        in a pass of its own (a chat's next turn, its history in cache) is never a burst's
        and only one such prompt runs a tick: four turns arriving together cost the streams
        four short stalls, not one as long as four passes. An image whose tokens attend
        both ways runs whole (`Sequence.whole_images`), even past what the tick allowed it:
        then it is the tick's last prompt chunk (its whole size counts against the tick;
        no burst or short prompt is added beside it)."""
        cfg = self.config
        budget = self.budget.budget(decode_rows, interactive)
        left = budget - decode_rows
        room = cfg.max_token_budget - decode_rows
        beyond_pace = False  # the tick is sized by a prompt's pace, not the allowance
        # (an image request waits for its vision-tower pass: EngineCore runs one a tick)
        order = sorted((s for s in self.prefilling if not s.awaits_vision),
                       key=lambda s: (s.priority, s.t_submit))
        if interactive and decode_rows and order:
            # the first prompt in line keeps its pace (a long one does not crawl at 1.5x)
            first = order[0]
            pace = min(room, first.num_prefill_left,
                       self.budget.pace(first.num_prompt_tokens - first.cached_tokens))
            if pace > left:
                left, budget = pace, decode_rows + pace
                beyond_pace = True
        # With shared passes a split prompt costs the streams nothing more than its tokens:
        # while interactive rows decode, short prompts are split like the others.
        whole = 0 if self.budget.shared_passes and interactive and decode_rows else \
            cfg.whole_prompt_tokens
        cap = max(left, min(whole, room))
        chunks, used, beyond = [], 0, beyond_pace
        turn_planned = False
        for seq in order:
            want = seq.num_prefill_left
            # A next turn costs about a pass (~a decode step on a CPU): one a tick while
            # chats stream, so a stream waits one extra pass at a time.
            turn = self.is_next_turn(seq) and interactive and decode_rows > 0
            if turn and turn_planned:
                continue
            burst = (not turn and streaming_since is not None
                     and seq.t_submit < streaming_since)
            n = min(want, cfg.prefill_burst, max(0, (room if burst else left) - used))
            beyond = beyond or n > max(0, left - used)
            if n < want <= min(whole, cfg.prefill_burst) and used + want <= cap:
                n, beyond = want, True
            allowed = n
            if n > 0:  # an image whose tokens attend both ways is never split
                n = seq.whole_images(n)
                beyond = beyond or n > max(0, left - used)
            if n > 0:
                chunks.append((seq, n))
                used += n
                turn_planned = turn_planned or turn
            if n > allowed:  # a whole image past its allowance is the tick's last prefill
                break
        return TickPlan(budget, decode_rows, interactive, chunks, beyond)

    def schedule(self, rows: DecodeRows) -> TickPlan:
        """The tick's plan (`plan`: the budget and the prompt chunks) with the decode rows
        `rows` and the drafts their planners give them: how many positions each sequence
        runs (`TickPlan.positions`)."""
        plan = self.plan(len(rows.seqs), rows.interactive, rows.streaming_since)
        plan.rows = list(rows.seqs)
        if plan.rows and self.planners:
            plan.drafts = self._drafts(plan, rows)
        return plan

    def _drafts(self, plan: TickPlan, rows: DecodeRows) -> dict[int, list[int]]:
        """Each planner's drafts for the rows it owns: none where the rows' step was started
        ahead (it is used as it is) or where the runner could not check them this tick."""
        mine = self._owned(plan.rows)
        if rows.started_ahead:
            for planner, own in zip(self.planners, mine, strict=True):
                planner.skip(plan.rows, own)
            return {}
        check = rows.check(plan)
        if check is None:
            return {}
        tick = RowsTick(plan.rows, rows.context_length, check, can_measure=not plan.prefill)
        drafts: dict[int, list[int]] = {}
        for planner, own in zip(self.planners, mine, strict=True):
            drafts.update(planner.drafts(tick, own))
        return drafts

    def _owned(self, seqs: list[Sequence]) -> list[list[int]]:
        """For each planner, the indices of the rows it owns (each row: its first owner)."""
        mine: list[list[int]] = [[] for _ in self.planners]
        for i, seq in enumerate(seqs):
            for own, planner in zip(mine, self.planners, strict=True):
                if planner.owns(seq):
                    own.append(i)
                    break
        return mine

    def will_draft(self, seqs: list[Sequence]) -> bool:
        """Whether a planner is likely to give one of the rows drafts at their next step
        (engine/decode_batch.py: that step is then not started ahead)."""
        if not self.planners:
            return False
        return any(planner.will_draft(seqs, own)
                   for planner, own in zip(self.planners, self._owned(seqs), strict=True))

    def checked(self, seq: Sequence, drafts: list[int], taken: int) -> None:
        """A pass checked the row's drafts and `taken` held: told to the row's planner."""
        for planner in self.planners:
            if planner.owns(seq):
                planner.checked(seq, drafts, taken)
                return

    def measured(self, rows: int, drafted: int, seconds: float) -> None:
        """A tick without prefill: its time, for the planners that weigh what drafts cost."""
        for planner in self.planners:
            planner.measured(rows, drafted, seconds)

    def forget(self, seq: Sequence) -> None:
        """The sequence ended: every planner lets go of what it kept for it."""
        for planner in self.planners:
            planner.forget(seq)

    def take_ready(self) -> list[Sequence]:
        """Prefilled sequences, in arrival order, ready for their first decode step."""
        ready = [s for s in self.prefilling if s.num_prefill_left == 0]
        if ready:
            self.prefilling = [s for s in self.prefilling if s.num_prefill_left > 0]
        return ready


def group_prefill(chunks: list[tuple[Sequence, int]], max_waste: float = 0.25,
                  max_history: int = 0) -> list[list[tuple[Sequence, int]]]:
    """Split a tick's prefill chunks into forward passes.

    Chunks share a pass when right-padding them to the longest wastes at most `max_waste`
    of the pass. A chunk whose prompt already has KV (a restored prefix, or an earlier
    chunk) joins only if that history is at most `max_history` tokens: batching copies the
    history into a padded cache and back out, which must cost less than the pass it saves
    (every pass reads all the weights). Turns of several chats that arrive together so
    share one pass.
    """
    shared = sorted((c for c in chunks if c[0].num_cached <= max_history), key=lambda c: -c[1])
    groups: list[list[tuple[Sequence, int]]] = [[c] for c in chunks
                                                 if c[0].num_cached > max_history]
    current: list[tuple[Sequence, int]] = []
    for seq, n in shared:
        if current:
            width, total = current[0][1], sum(m for _, m in current) + n
            if width * (len(current) + 1) * (1 - max_waste) > total:
                groups.append(current)
                current = []
        current.append((seq, n))
    if current:
        groups.append(current)
    return groups
