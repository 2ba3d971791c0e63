"""Speculative decoding inside the batch: which rows draft, how many tokens, and checking them.

A decode step is bound by reading the weights once, so a row that feeds k drafted tokens
with its next input gets the target's logits for k+1 positions for little more than one
step's cost. The check keeps the answer exactly the one without speculation: each position
draws its token as plain decoding would at that step (its sampler, its penalty history with
the drafts before it, its seed's uniform for that step), and the row takes the drawn tokens
while they equal the drafts, plus the first one that differs (or one past the last draft).
For a draft that is a single proposed token (n-gram lookup, a greedy draft model) this is
speculative sampling with a point-mass proposal: a draft is accepted with the target's
probability of it, and the output's distribution is the target's. A greedy or seeded
request therefore answers token for token as it would without speculation, alone or in any
batch (on the CPU backend's invariant kernels, engine/determinism.py).

What it costs is measured, not assumed: the time of plain decode ticks per row count and
the extra time per drafted position of ticks that verified. A row drafts only when the
tokens it expects to gain (from its recent acceptance) are worth more of the batch's time
than its drafted positions cost; a row whose drafts keep failing stops for a while and
tries again later; a large batch, where every position costs about as much as a row's
share of the step, stops drafting by the same rule.

`Speculation` is one of the scheduler's planners (engine/planners.py): it owns the decode
rows it may draft for, after the grammar planner has taken those with a grammar.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Collection
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .drafting import NgramDrafter

if TYPE_CHECKING:
    from .planners import RowsTick

log = logging.getLogger(__name__)

MODES = ("off", "ngram", "draft:PATH")
DRAFT_PREFIX = "draft:"  # "draft:PATH": a draft model at PATH (engine/draft_model.py)
_DECAY = 0.8  # weight of a row's older checks in its acceptance


def check_mode(mode: str) -> str:
    """`mode` if it is one the engine knows; ValueError naming the choices otherwise."""
    if mode in ("off", "ngram") or (mode.startswith(DRAFT_PREFIX)
                                    and draft_path(mode).strip()):
        return mode
    raise ValueError(f"speculative must be one of {', '.join(MODES)} (PATH: a draft model "
                     f"with the same tokenizer, a .gguf file or an mlx-lm directory), "
                     f"got {mode!r}")


def draft_path(mode: str) -> str | None:
    """The draft model's path of a "draft:PATH" mode (None for the other modes)."""
    return mode[len(DRAFT_PREFIX):] if mode.startswith(DRAFT_PREFIX) else None


class DraftSource(Protocol):
    """Where drafts come from: the rows that draft this step, all together."""

    def propose(self, rows: list[tuple[Any, int]]) -> list[list[int]]:
        """Up to k draft tokens for each (row, k), in order ([] for none)."""
        ...

    def likely(self, seq: Any) -> bool:
        """Whether it expects to have drafts for the row at its next step."""
        ...

    def forget(self, seq: Any) -> None:
        """The row ended: drop whatever the source keeps for it."""
        ...


class NgramSource:
    """Drafts looked up in each row's own prompt and output (engine/drafting.py), kept on
    its RowSpec."""

    def propose(self, rows: list[tuple[Any, int]]) -> list[list[int]]:
        return [self._drafter(seq).propose(k) for seq, k in rows]

    def likely(self, seq: Any) -> bool:
        return bool(self._drafter(seq).propose(1))

    def forget(self, seq: Any) -> None:
        pass  # its drafter goes with the row

    @staticmethod
    def _drafter(seq: Any) -> NgramDrafter:
        """The row's drafter, its text = the row's prompt and output (tokens taken since
        are added)."""
        spec = seq.spec
        if spec.drafter is None:
            spec.drafter = NgramDrafter(seq.prompt_tokens + seq.output_tokens)
            return spec.drafter
        have = len(spec.drafter)
        out = seq.output_tokens
        if seq.num_prompt_tokens <= have < seq.num_prompt_tokens + len(out):
            spec.drafter.extend(out[have - seq.num_prompt_tokens:])
        return spec.drafter


@dataclass(slots=True)
class RowSpec:
    """One row's drafting state and counters (Sequence.spec)."""

    drafter: NgramDrafter | None  # the n-gram source's index of its text (NgramSource)
    k: int  # the draft length it asks for next
    # Each checked draft is a trial until the first refusal: acceptance = hits / trials
    # (the chance the next draft holds, given the ones before it did), decaying averages
    # that start hopeful (2 of 3)
    hits: float = 2.0
    trials: float = 3.0
    rest: int = 0  # steps left before it drafts again
    # after a rest the costs said to take: its next drafts are checked whatever the costs
    # say (one or two tokens), so a position's cost is measured again: one slow tick must
    # not turn drafting off for good
    probe: bool = False
    gated: int = 0  # rests in a row the costs said to take (each rest twice the last)
    misses: int = 0  # consecutive checks that accepted nothing
    # rests its failing drafts took since its drafts last all held (each twice the last:
    # a row writing prose has its bigrams recur now and then, and each hopeful try after
    # a rest costs a check that mostly fails)
    failed: int = 0

    @property
    def acceptance(self) -> float:
        return self.hits / self.trials

    def resting(self) -> bool:
        """Whether the row rests this step (which counts towards its rest)."""
        if not self.rest:
            return False
        self.rest -= 1
        return True


@dataclass(frozen=True, slots=True)
class CheckCost:
    """What checking drafts adds to a tick: `fixed_s` once (the pass that checks is not the
    plain step: on a CPU the compiled step gives way to an uncompiled pass with a segment
    per drafting row) plus `position_s` for each drafted position."""

    fixed_s: float
    position_s: float

    def of(self, positions: int) -> float:
        return self.fixed_s + self.position_s * positions


@dataclass(slots=True)
class StepCosts:
    """Measured tick times by row count: plain decode ticks, and what a checked tick adds."""

    alpha: float = 0.2
    plain_s: dict[int, float] = field(default_factory=dict)  # rows -> a plain decode tick
    # rows -> (drafted positions, extra seconds) of its last few checked ticks; fitted
    # with medians (one slow tick moves the fit no more than one fast one does)
    checks: dict[int, deque[tuple[int, float]]] = field(default_factory=dict)
    keep: int = 8
    # checked ticks since the last plain one, by row count: a source that always has drafts
    # (a draft model) would otherwise never let a plain tick be measured
    refresh_every: int = 64
    checked_since: dict[int, int] = field(default_factory=dict)
    # Where not even drafts that always hold would pay, nobody drafts; a tick checks
    # drafts anyway after `probe_wait[rows]` plain ticks there (first_wait, twice as many
    # each time the costs still say no, at most max_wait), so the costs are measured again:
    # one slow tick must not turn drafting off for good
    first_wait: int = 16
    max_wait: int = 1024
    probe_wait: dict[int, int] = field(default_factory=dict)
    waited: dict[int, int] = field(default_factory=dict)
    # rows -> the fit of its checks, made once per new check (it is read a few times a tick)
    _fits: dict[int, CheckCost] = field(default_factory=dict)

    def wants_plain(self, rows: int) -> bool:
        """Whether a plain tick at `rows` rows is still to be measured, or is stale."""
        return rows not in self.plain_s or self.checked_since.get(rows, 0) >= self.refresh_every

    def plain(self, rows: int) -> float | None:
        """A plain decode tick's time at `rows` rows (else at the nearest measured count)."""
        near = _nearest(self.plain_s, rows)
        return None if near is None else self.plain_s[near]

    def check(self, rows: int) -> CheckCost | None:
        """What checking drafts adds to a tick of `rows` rows (else at the nearest count
        measured; None: never measured)."""
        near = _nearest(self.checks, rows)  # (a row count's checks are never empty)
        if near is None:
            return None
        if near not in self._fits:
            self._fits[near] = _fit(list(self.checks[near]))
        return self._fits[near]

    def set_check(self, position_s: float, rows: int = 1, fixed_s: float = 0.0) -> None:
        """Take these as what checking costs at `rows` rows (and, until they are measured,
        at the others)."""
        checks = [(1, position_s)] if not fixed_s else [(1, fixed_s + position_s),
                                                        (2, fixed_s + 2 * position_s)]
        self.checks[rows] = deque(checks, maxlen=self.keep)
        self._fits.pop(rows, None)

    def pays(self, rows: int, most: int) -> bool:
        """Whether drafts that always hold, `most` for every row, would pay for their
        check at `rows` rows (True while the costs are not known)."""
        plain, cost = self.plain(rows), self.check(rows)
        if plain is None or cost is None:
            return True
        return most * plain > cost.of(rows * most)  # rows x most tokens, each plain / rows

    def probe_due(self, rows: int) -> bool:
        """Where drafting does not pay: whether a tick should check drafts anyway now."""
        return self.waited.get(rows, 0) >= self.probe_wait.get(rows, self.first_wait)

    def probed(self, rows: int) -> None:
        """A tick checks drafts where they did not pay: the next waits twice as long."""
        self.waited[rows] = 0
        self.probe_wait[rows] = min(2 * self.probe_wait.get(rows, self.first_wait),
                                    self.max_wait)

    def observe_plain(self, rows: int, seconds: float, most: int = 16) -> None:
        old = self.plain_s.get(rows)
        self.plain_s[rows] = seconds if old is None else old + self.alpha * (seconds - old)
        self.checked_since[rows] = 0
        if self.pays(rows, most):
            self.probe_wait.pop(rows, None)
            self.waited.pop(rows, None)
        else:
            self.waited[rows] = self.waited.get(rows, 0) + 1

    def observe_checked(self, rows: int, positions: int, seconds: float) -> None:
        """A decode tick of `rows` rows that also ran `positions` drafted positions."""
        plain = self.plain_s.get(rows)
        if plain is None or positions <= 0:
            return
        self.checked_since[rows] = self.checked_since.get(rows, 0) + 1
        extra = max(0.0, seconds - plain)
        if extra > plain * (1 + positions):
            # more than a whole plain step for each position and the check: not what they
            # cost (a kernel compiled for a new shape on first use, page faults, another
            # process)
            return
        self.checks.setdefault(rows, deque(maxlen=self.keep)).append((positions, extra))
        self._fits.pop(rows, None)


def _lower_median(values: list[float]) -> float:
    return sorted(values)[(len(values) - 1) // 2]


def _fit(checks: list[tuple[int, float]]) -> CheckCost:
    """A fixed cost and a cost per position from (positions, extra seconds) pairs, robustly
    (Theil-Sen: the median of the pairwise slopes, then the median intercept). With one
    draft count only, all of it is taken as the positions' (the fixed part unknown)."""
    slopes = [(e2 - e1) / (p2 - p1) for i, (p1, e1) in enumerate(checks)
              for p2, e2 in checks[i + 1:] if p2 != p1]
    if not slopes:
        return CheckCost(0.0, _lower_median([e / p for p, e in checks]))
    position = max(0.0, _lower_median(slopes))
    return CheckCost(max(0.0, _lower_median([e - position * p for p, e in checks])), position)


def _nearest(by_rows: dict[int, Any], rows: int) -> int | None:
    """`rows` if it is a key of `by_rows`, else the nearest row count that is (None: empty)."""
    if not by_rows:
        return None
    if rows in by_rows:
        return rows
    return min(by_rows, key=lambda r: abs(r - rows))


class Speculation:
    """The engine's drafting policy (one per EngineCore; engine thread only), a planner of
    the scheduler's (engine/planners.py `Planner`)."""

    def __init__(self, mode: str, max_drafts: int = 16,
                 source: DraftSource | None = None) -> None:
        """`source`: where drafts come from; the n-gram lookup by default ("draft:PATH"
        needs its loaded draft model, engine/draft_model.py)."""
        self.mode = check_mode(mode)
        if source is None and draft_path(mode) is not None:
            raise ValueError(f"speculative={mode!r} needs its draft model loaded")
        self.source: DraftSource = source if source is not None else NgramSource()
        self.max_drafts = max_drafts
        self.costs = StepCosts()
        self.min_acceptance = 0.25  # below it a row rests
        self.probe_every = 16  # steps a row rests before it drafts again
        self.retry_after = 4  # steps rows rest when their check as a whole would not pay
        # engine-wide counters (/metrics, the stats panel)
        self.drafted = 0
        self.accepted = 0

    # -- rows ---------------------------------------------------------------------------
    def eligible(self, seq: Any) -> bool:
        """Whether a row may draft at all: no log-probabilities asked (read per position as
        they come), no image. (A row with a grammar is the grammar planner's, which comes
        first: engine/grammar_planner.py.)"""
        # (an image request's keyed prompt ids are no tokens to draft from: engine/vision)
        return seq.params.logprobs is None and getattr(seq, "vision", None) is None

    # -- as a planner (engine/planners.py) -----------------------------------------------
    def owns(self, seq: Any) -> bool:
        return self.eligible(seq)

    def drafts(self, tick: RowsTick, mine: list[int]) -> dict[int, list[int]]:
        return self.plan(tick.rows, tick.context_length, can_measure=tick.can_measure,
                         uniform=tick.check == "padded", mine=mine)

    def measured(self, rows: int, drafted: int, seconds: float) -> None:
        """A tick without prefill: a checked tick's time, or a plain one's."""
        if drafted:
            self.costs.observe_checked(rows, drafted, seconds)
        else:
            self.costs.observe_plain(rows, seconds, self.max_drafts)

    def row(self, seq: Any) -> RowSpec | None:
        """The row's drafting state, made at its first decode step (None: not eligible)."""
        if seq.spec is None and self.eligible(seq):
            seq.spec = RowSpec(None, k=min(4, self.max_drafts))
        return seq.spec

    def wants_to_draft(self, seq: Any) -> bool:
        """Whether the row is likely to draft at its next step: not resting, and its source
        expects drafts for it (n-gram: its text ends in an n-gram seen before, a copying
        row stays copying). Such a row reads each token before its next step starts; any
        other runs ahead as without speculation (a lone row on the CPU:
        engine/decode_batch.py)."""
        spec = self.row(seq)
        if spec is None or spec.rest:
            return False
        return self.source.likely(seq)

    def will_draft(self, seqs: Seq[Any], mine: Collection[int] | None = None) -> bool:
        """Whether any of a batch's rows (`mine`: of those rows; None: all) is likely to
        draft at its next step: drafting can pay at its row count (or a check of the costs
        is due there) and a row wants to."""
        rows = len(seqs)
        if not (self.costs.pays(rows, self.max_drafts) or self.costs.probe_due(rows)):
            return False
        return any(self.wants_to_draft(seqs[i])
                   for i in (range(rows) if mine is None else mine))

    def skip(self, seqs: Seq[Any], mine: Collection[int] | None = None) -> None:
        """A tick that does not plan (its step was started ahead): resting rows count it."""
        for i in range(len(seqs)) if mine is None else mine:
            if seqs[i].spec is not None:
                seqs[i].spec.resting()

    def plan(self, seqs: Seq[Any], context_length: int, can_measure: bool = False,
             uniform: bool = False, mine: Collection[int] | None = None,
             ) -> dict[int, list[int]]:
        """Each row's drafts for this tick, by row index (rows without drafts are absent).
        A row's j-th draft is wanted while the token it is likely to gain is worth more of
        the batch's time than its position costs, and the tick checks the rows' drafts
        only if all they are likely to gain pays for the whole check, its fixed part too
        (`CheckCost`); the source then drafts for those rows together. `can_measure`: this
        tick's time would be a decode step's alone (no prefill); it then runs plain when a
        plain step at this row count is still to be measured, or is stale. `uniform`: every
        row of the pass gets as many positions as the row with most drafts (a batch that
        checks drafts apart from the ragged pass): a k-th position then costs one for every
        row, and is used only while the rows' likely gains from it pay for that. `mine`:
        the rows it may draft for (None: all); the others still count in the costs."""
        wanted: list[tuple[int, int]] = []  # (row index, draft length)
        rows = len(seqs)
        mine = None if mine is None else set(mine)
        if can_measure and self.costs.wants_plain(rows):
            return {}
        plain, cost = self.costs.plain(rows), self.costs.check(rows)
        share = plain / rows if plain is not None else None  # what a row's token is worth
        # Not even drafts that always hold pay here: nobody drafts, but now and then a tick
        # without prefill (its cost is measured) checks a draft or two for every row
        probing = not self.costs.pays(rows, self.max_drafts)
        if probing:
            if not (can_measure and self.costs.probe_due(rows)):
                return {}
            self.costs.probed(rows)
        for i, seq in enumerate(seqs):
            if mine is not None and i not in mine:
                continue
            spec = self.row(seq)
            if spec is None or seq.is_finished:
                continue
            if spec.resting():
                continue
            room = min(spec.k, seq.params.max_tokens - seq.num_output_tokens - 1,
                       context_length - seq.num_tokens - 1)
            if room <= 0:
                continue
            if spec.probe or probing:
                spec.probe = False
                room = min(room, 2)
            elif share is not None and cost is not None:
                # the j-th draft is worth its position when p^j x a row's share of a step
                # (the time one token of it costs the batch) exceeds the position's cost
                best = _best_length(spec.acceptance, share, cost.position_s)
                if best == 0:
                    self._gate(spec)
                    continue
                spec.gated = 0
                room = min(room, best)
            wanted.append((i, room))
        if wanted and not probing and share is not None and cost is not None:
            wanted = [(i, k) for i, k in wanted if self.source.likely(seqs[i])]
            worth = self._worth_checking(seqs, wanted, share, cost, uniform)
            if not worth:
                for i, _ in wanted:  # the check would not pay: they try again soon
                    seqs[i].spec.rest = max(seqs[i].spec.rest, self.retry_after)
            wanted = worth
        if not wanted:
            return {}
        try:
            drafts = self.source.propose([(seqs[i], k) for i, k in wanted])
        except Exception as exc:  # noqa: BLE001 - drafts are optional: the step runs plain
            log.warning("drafting failed (%s: %s); this step runs without drafts",
                        type(exc).__name__, exc)
            for i, _ in wanted:  # whatever the source kept for them may be half-written
                self.source.forget(seqs[i])
            return {}
        return {i: d[:k] for (i, k), d in zip(wanted, drafts, strict=True) if d}

    @staticmethod
    def _worth_checking(seqs: Seq[Any], wanted: list[tuple[int, int]], share: float,
                        cost: CheckCost, uniform: bool) -> list[tuple[int, int]]:
        """`wanted` (cut to the columns that pay, in a uniform pass) if the tokens the rows
        are likely to gain are worth more than the whole check costs; [] otherwise."""
        rows = len(seqs)
        if uniform:
            width = _columns_that_pay([seqs[i].spec.acceptance for i, _ in wanted], share,
                                      cost.position_s, rows)
            wanted = [(i, min(k, width)) for i, k in wanted] if width else []
            positions = rows * max((k for _, k in wanted), default=0)
        else:
            positions = sum(k for _, k in wanted)
        gain = share * sum(_likely_tokens(seqs[i].spec.acceptance, k) for i, k in wanted)
        return wanted if positions and gain > cost.of(positions) else []

    def _gate(self, spec: RowSpec) -> None:
        """Drafting does not pay for the row now: it rests, then checks one or two drafts
        anyway (its acceptance, or the costs, may have changed), less often each time."""
        spec.rest = self.probe_every << min(spec.gated, 4)
        spec.k, spec.probe = min(2, self.max_drafts), True
        spec.gated += 1

    def forget(self, seq: Any) -> None:
        """The row ended (EngineCore._finish): its source's state for it goes."""
        if seq.spec is not None:
            self.source.forget(seq)

    def checked(self, seq: Any, drafts: list[int], taken: int) -> None:
        """After a check: `taken` of the row's `drafts` were accepted (before any
        early finish). Adapts its draft length and its rest."""
        spec = seq.spec
        n = len(drafts)
        seq.drafted += n
        seq.accepted_drafts += taken
        self.drafted += n
        self.accepted += taken
        spec.hits = _DECAY * spec.hits + taken
        spec.trials = _DECAY * spec.trials + taken + (taken < n)
        if taken == n:
            spec.k = min(self.max_drafts, spec.k + 2)
            spec.failed = 0
        else:
            spec.k = max(1, taken + 1)
        spec.misses = spec.misses + 1 if taken == 0 else 0
        if spec.acceptance < self.min_acceptance or spec.misses >= 4:
            # rest a while (longer each time), then try again, hopeful
            spec.rest = self.probe_every << min(spec.failed, 4)
            spec.failed += 1
            spec.hits, spec.trials = 1.0, 2.0
            spec.misses = 0
            spec.k = min(2, self.max_drafts)


def _best_length(p: float, share_s: float, position_s: float) -> int:
    """The draft length whose last position still pays for itself: p^j x share > cost."""
    j = 0
    while j < 16 and p ** (j + 1) * share_s > position_s:
        j += 1
    return j


def _columns_that_pay(acceptances: list[float], share_s: float, position_s: float,
                      rows: int) -> int:
    """The most positions past their inputs a uniform pass should give its rows: the
    j-th costs a position in each of `rows` rows and gains each drafting row a token
    with chance p^j (a token is worth a row's share of a step)."""
    j = 0
    while j < 16 and sum(p ** (j + 1) for p in acceptances) * share_s > rows * position_s:
        j += 1
    return j


def _likely_tokens(p: float, k: int) -> float:
    """The drafts a row is likely to have accepted of `k`, each holding with chance p
    given the ones before it did."""
    return sum(p ** j for j in range(1, k + 1))


def accept_drawn(drafts: list[int], drawn: list[int]) -> list[int]:
    """The tokens a checked row takes: the drawn ones while they equal the drafts, plus the
    first that differs (or the one after the last draft). `drawn` has len(drafts) + 1."""
    out = []
    for i, token in enumerate(drawn):
        out.append(token)
        if i == len(drafts) or token != drafts[i]:
            break
    return out
