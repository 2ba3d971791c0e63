"""Each sequence's next token from its logits: one sampling rule for all of the engine.

Used for a prompt's first token (sampled in its last prefill pass), decode rows and the
step started ahead. The rule: each sequence's own sampler, the repetition penalty over its
`penalty_history` (the last `repetition_context_size` tokens of prompt and output), and
the step number (the tokens it has generated) that seeds its draw. A step started ahead
samples before its input token is read back: that token is `pending`, so it counts in the
history and the step without being in `output_tokens` yet. A pass's result, as the
engine's step post-processes it, is a `PassResult`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import mlx.core as mx

from .constraint import mask_logits
from .sampling import TokenLogprobs, row_logprobs, sample_rows
from .sequence import Sequence
from .speculation import accept_drawn


def sample_next(seqs: list[Sequence], logits: mx.array, pending: mx.array | None = None
                ) -> tuple[mx.array, list[TokenLogprobs | None] | None]:
    """Each sequence's next token from its row of `logits` (not yet evaluated), and the rows'
    log-probabilities where asked (None: no row asked). `pending` (rows,): each sequence's
    last token, sampled but not yet appended to its output (a step started ahead, which
    never starts for a request that asks for log-probabilities; a row with a grammar has
    its matcher take the pending token early, DecodeBatch.step). A row with a grammar draws
    from its logits masked to what the grammar allows next (engine/constraint.py); its
    log-probabilities are those of the masked distribution."""
    if pending is not None and not all(s.matcher is None or s.matcher.took_early
                                       for s in seqs):
        raise RuntimeError("a step started ahead before a grammar took its input token")
    logits = mask_logits([s.matcher for s in seqs], logits)
    samplers = [s.sampler for s in seqs]
    histories = [s.penalty_history() for s in seqs]
    steps = [s.num_output_tokens + (pending is not None) for s in seqs]
    picked = sample_rows(samplers, histories, steps, logits, pending=pending)
    if pending is not None:
        return picked, None
    return picked, row_logprobs(samplers, histories, logits, picked)


def sample_drafted(seqs: list[Sequence], drafts: list[list[int]], logits: mx.array
                   ) -> tuple[list[list[int]], list[TokenLogprobs | None]]:
    """The tokens each row takes from a pass that checked drafts (engine/speculation.py), and
    the rows' log-probabilities where asked. `logits` holds, per row in order, the logits
    after its input and after each of its drafts (1 + len(drafts) rows; a row without
    drafts has one). Position i draws as plain decoding would at that step: the row's
    grammar mask as it stands after the drafts before i, its sampler, its penalty history
    with those drafts, its step's uniform. Rows with log-probabilities never draft (only
    the first position's are returned)."""
    matchers, samplers, histories, steps, first = [], [], [], [], []
    grammar_drafts: dict[int, list[int]] = {}  # a constrained row's first position: drafts
    for seq, row_drafts in zip(seqs, drafts, strict=True):
        window = seq.sampler.penalty_window
        history = seq.penalty_history()
        first.append(len(samplers))
        if seq.matcher is not None and row_drafts:
            grammar_drafts[len(samplers)] = row_drafts
        for i in range(len(row_drafts) + 1):
            matchers.append(seq.matcher)
            samplers.append(seq.sampler)
            histories.append((history + row_drafts[:i])[-window:] if window else [])
            steps.append(seq.num_output_tokens + i)
    logits = mask_logits(matchers, logits, grammar_drafts)
    picked = sample_rows(samplers, histories, steps, logits)
    lps = row_logprobs(samplers, histories, logits, picked)
    drawn = picked.tolist()
    taken = [accept_drawn(row_drafts, drawn[at:at + len(row_drafts) + 1])
             for row_drafts, at in zip(drafts, first, strict=True)]
    return taken, [None if lps is None else lps[at] for at in first]


def sample_pass(seqs: list[Sequence], logits: mx.array) -> PassResult:
    """`sample_next` for a pass's sequences, read back."""
    return PassResult.sampled(seqs, *sample_next(seqs, logits))


@dataclass(frozen=True, slots=True)
class PassResult:
    """What one forward pass gives its sequences (in order): each one's new token, with its
    log-probabilities where asked, or the error that fails them all. A row whose drafts were
    checked may take more tokens in the pass: `more[i]`, after `tokens[i]` (its KV already
    cut to what it takes)."""

    seqs: list[Sequence]
    tokens: list[int]
    logprobs: list[TokenLogprobs | None]
    error: BaseException | None = None
    more: list[list[int]] | None = None
    # the drafts each row checked, where the pass checked some (post-processing tells the
    # speculation planner how many held)
    drafts: list[list[int]] | None = None
    # when the pass ended: its tokens' time (a first token's, a row's gap), however late
    # the core accepts them (after the tick's other prefill passes, say)
    at: float = field(default_factory=time.perf_counter)

    @classmethod
    def sampled(cls, seqs: list[Sequence], picked: mx.array,
                logprobs: list[TokenLogprobs | None] | None) -> PassResult:
        """From `sample_next`'s result (the tokens are read back here)."""
        return cls(list(seqs), picked.tolist(), logprobs or [None] * len(seqs))

    @classmethod
    def failed(cls, seqs: list[Sequence], error: BaseException) -> PassResult:
        return cls(list(seqs), [], [], error)
