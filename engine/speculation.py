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
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any, Protocol

from .drafting import NgramDrafter

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

    @property
    def acceptance(self) -> float:
        return self.hits / self.trials


@dataclass(slots=True)
class StepCosts:
    """Measured tick times by row count: plain decode ticks, and the extra time a drafted
    position adds to a tick."""

    alpha: float = 0.2
    plain_s: dict[int, float] = field(default_factory=dict)  # rows -> a plain decode tick
    # rows -> the extra time per drafted position of its last few checked ticks (a median
    # of them is used: one slow tick moves it no more than one fast one does)
    position_samples: dict[int, deque[float]] = field(default_factory=dict)
    keep: int = 5
    # checked ticks since the last plain one, by row count: a source that always has drafts
    # (a draft model) would otherwise never let a plain tick be measured
    refresh_every: int = 64
    checked_since: dict[int, int] = field(default_factory=dict)
    # Where not even a draft that always holds pays for its position, nobody drafts; a tick
    # checks drafts anyway after `probe_wait[rows]` plain ticks there (first_wait, twice as
    # many each time the costs still say no, at most max_wait), so the costs are measured
    # again: one slow tick must not turn drafting off for good
    first_wait: int = 16
    max_wait: int = 1024
    probe_wait: dict[int, int] = field(default_factory=dict)
    waited: dict[int, int] = field(default_factory=dict)

    def wants_plain(self, rows: int) -> bool:
        """Whether a plain tick at `rows` rows is still to be measured, or is stale."""
        return rows not in self.plain_s or self.checked_since.get(rows, 0) >= self.refresh_every

    def plain(self, rows: int) -> float | None:
        """A plain decode tick's time at `rows` rows (else at the nearest measured count)."""
        return _at_or_near(self.plain_s, rows)

    def position(self, rows: int) -> float | None:
        """A drafted position's cost in a tick of `rows` rows (else at the nearest count
        measured): the lower median of its last few checked ticks."""
        medians = {r: sorted(xs)[(len(xs) - 1) // 2]
                   for r, xs in self.position_samples.items() if xs}
        return _at_or_near(medians, rows)

    def set_position(self, seconds: float, rows: int = 1) -> None:
        """Take `seconds` as what a drafted position costs at `rows` rows (and, until they
        are measured, at the others)."""
        self.position_samples[rows] = deque([seconds], maxlen=self.keep)

    def pays(self, rows: int) -> bool:
        """Whether a draft that always holds would pay for its position at `rows` rows
        (True while the costs are not known)."""
        plain, position = self.plain(rows), self.position(rows)
        return plain is None or position is None or _best_length(1.0, plain / rows,
                                                                 position) > 0

    def probe_due(self, rows: int) -> bool:
        """Where drafting does not pay: whether a tick should check drafts anyway now."""
        return self.waited.get(rows, 0) >= self.probe_wait.get(rows, self.first_wait)

    def probed(self, rows: int) -> None:
        """A tick checks drafts where they did not pay: the next waits twice as long."""
        self.waited[rows] = 0
        self.probe_wait[rows] = min(2 * self.probe_wait.get(rows, self.first_wait),
                                    self.max_wait)

    def observe_plain(self, rows: int, seconds: float) -> None:
        old = self.plain_s.get(rows)
        self.plain_s[rows] = seconds if old is None else old + self.alpha * (seconds - old)
        self.checked_since[rows] = 0
        if self.pays(rows):
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
        each = max(0.0, seconds - plain) / positions
        if each > plain:
            # more than a whole plain step a position: not what positions cost (a kernel
            # compiled for a new shape on its first use, page faults, another process)
            return
        samples = self.position_samples.setdefault(rows, deque(maxlen=self.keep))
        samples.append(each)


def _at_or_near(by_rows: dict[int, float], rows: int) -> float | None:
    """The value at `rows`, else at the nearest row count that has one (None: none has)."""
    if rows in by_rows:
        return by_rows[rows]
    if not by_rows:
        return None
    return by_rows[min(by_rows, key=lambda r: abs(r - rows))]


class Speculation:
    """The engine's drafting policy (one per EngineCore; engine thread only)."""

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
        # engine-wide counters (/metrics, the stats panel)
        self.drafted = 0
        self.accepted = 0

    # -- rows ---------------------------------------------------------------------------
    def eligible(self, seq: Any) -> bool:
        """Whether a row may draft at all: no grammar (its matcher takes one token at a
        time) and no log-probabilities asked (read per position as they come)."""
        return seq.matcher is None and seq.params.logprobs is None

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

    def will_draft(self, seqs: Seq[Any]) -> bool:
        """Whether any of a batch's rows is likely to draft at its next step: drafting pays
        at its row count (or a check of the costs is due there) and a row wants to."""
        rows = len(seqs)
        if not (self.costs.pays(rows) or self.costs.probe_due(rows)):
            return False
        return any(self.wants_to_draft(seq) for seq in seqs)

    def plan(self, seqs: Seq[Any], context_length: int, can_measure: bool = False,
             uniform: bool = False) -> dict[int, list[int]]:
        """Each row's drafts for this tick, by row index (rows without drafts are absent).
        A row drafts when the tokens it is likely to gain pay for its positions; the
        source then drafts for all those rows together. `can_measure`: this tick's time
        would be a decode step's alone (no prefill); it then runs plain when a plain
        step at this row count is still to be measured, or is stale. `uniform`: every row
        of the pass gets as many positions as the row with most drafts (a batch that
        checks drafts apart from the ragged pass): a k-th position then costs one for
        every row, and is used only while the rows' likely gains from it pay for that."""
        wanted: list[tuple[int, int]] = []  # (row index, draft length)
        rows = len(seqs)
        if can_measure and self.costs.wants_plain(rows):
            return {}
        plain, position = self.costs.plain(rows), self.costs.position(rows)
        # Not even drafts that always hold pay here: nobody drafts, but now and then a tick
        # without prefill (its cost is measured) checks a draft or two for every row
        probing = not self.costs.pays(rows)
        if probing:
            if not (can_measure and self.costs.probe_due(rows)):
                return {}
            self.costs.probed(rows)
        for i, seq in enumerate(seqs):
            spec = self.row(seq)
            if spec is None or seq.is_finished:
                continue
            if spec.rest:
                spec.rest -= 1
                continue
            room = min(spec.k, seq.params.max_tokens - seq.num_output_tokens - 1,
                       context_length - seq.num_tokens - 1)
            if room <= 0:
                continue
            if spec.probe or probing:
                spec.probe = False
                room = min(room, 2)
            elif plain is not None and position is not None:
                # the j-th draft is worth its position when p^j x a row's share of a step
                # (the time one token of it costs the batch) exceeds the position's cost
                best = _best_length(spec.acceptance, plain / rows, position)
                if best == 0:
                    self._gate(spec)
                    continue
                spec.gated = 0
                room = min(room, best)
            wanted.append((i, room))
        if uniform and wanted and not probing and plain is not None and position is not None:
            wanted = [(i, k) for i, k in wanted if self.source.likely(seqs[i])]
            width = _columns_that_pay([seqs[i].spec.acceptance for i, _ in wanted],
                                      plain / rows, position, rows)
            if width == 0:
                for i, _ in wanted:  # rest as a row the costs said no to (above)
                    self._gate(seqs[i].spec)
                return {}
            wanted = [(i, min(k, width)) for i, k in wanted]
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
        else:
            spec.k = max(1, taken + 1)
        spec.misses = spec.misses + 1 if taken == 0 else 0
        if spec.acceptance < self.min_acceptance or spec.misses >= 4:
            # rest a while, then try again, hopeful
            spec.rest = self.probe_every
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


def accept_drawn(drafts: list[int], drawn: list[int]) -> list[int]:
    """The tokens a checked row takes: the drawn ones while they equal the drafts, plus the
    first that differs (or the one after the last draft). `drawn` has len(drafts) + 1."""
    out = []
    for i, token in enumerate(drawn):
        out.append(token)
        if i == len(drafts) or token != drafts[i]:
            break
    return out
