"""The forward passes a tick can run, once `ModelRunner.execute` has chosen them: one ragged
pass for the decode rows and the prompt chunks (`run_shared`), or the prefill passes
(`run_prefill`) and then the rows' step, plain (`run_decode`: compiled replay and run-ahead
are `DecodeBatch.step`'s), a lone row checking its drafts (`run_checked_alone`) or a batch
checking them in a padded pass of its own (`run_checked_rows`).

Each function returns its passes' results (`PassResult`, in pass order); none touches a
sequence's output, which only the engine core changes when it accepts them
(`EngineCore.step`). The passes a function runs do not read each other's tokens (a tick
runs each sequence once), so they are accepted after it returns; the rows' step after the
prefill passes is a call of its own, made once the prompts they finished joined the batch.
Nothing here decides which pass runs; every function runs the pass it is named for.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .next_token import PassResult, sample_drafted, sample_pass
from .scheduler import TickPlan, group_prefill
from .vision.mrope import placed

if TYPE_CHECKING:
    import mlx.core as mx

    from .decode_batch import DecodeBatch
    from .model_runner import ModelRunner
    from .sequence import Sequence

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RowEnds:
    """Where a decode row ends anyway, as post-processing will find it: its first
    end-of-sequence token, its max_tokens, the context. A pass that checked drafts cuts the
    tokens a row draws there, so the row's KV matches what it takes."""

    eos_token_ids: frozenset[int]
    context_length: int

    def cut(self, seq: Sequence, tokens: list[int]) -> list[int]:
        """`tokens` drawn for `seq`, cut where it will end anyway (at least one kept)."""
        room = min(seq.params.max_tokens - seq.num_output_tokens,
                   self.context_length - seq.num_tokens)
        tokens = tokens[:max(1, room)]
        for i, token in enumerate(tokens):
            if token in self.eos_token_ids:
                return tokens[:i + 1]
        return tokens


@dataclass(slots=True)
class TickRun:
    """How a tick ran and what its passes measured (the budget and the telemetry)."""

    rows: int = 0  # decode rows in its step
    batched: bool = False  # they ran as a batch cache
    shared: bool = False  # the rows and the chunks ran in one pass
    prefill_s: float = 0.0  # prefill passes apart from the step, first tokens sampled
    forward_s: float = 0.0  # the step's pass and sampling (a shared pass: all of it)
    decode_s: float = 0.0  # the step, its tokens sampled (a shared pass: since the tick began)
    drafted: int = 0  # drafted positions its step checked (engine/speculation.py)
    rows_done: bool = False  # the rows' step ran in the one ragged pass: no step follows


def run_shared(runner: ModelRunner, plan: TickPlan, batch: DecodeBatch, ends: RowEnds,
               run: TickRun) -> list[PassResult] | None:
    """The tick's decode rows (with their drafts) and prefill chunks in one ragged pass
    (engine/ragged_pass.py): the first tokens of the prompts it finished (a chunk that ends
    its prompt gives it, as in `run_prefill`), then the rows' tokens. None when the pass
    failed and left every cache as it was: the tick then runs its passes apart, where an
    error fails only the requests of its pass."""
    t = time.perf_counter()
    chunks, drafts = plan.prefill, plan.drafts
    rows = list(batch.seqs)
    pieces = [seq.prompt_tokens[seq.num_cached : seq.num_cached + n] for seq, n in chunks]
    last = [seq.num_cached + n == seq.num_prompt_tokens for seq, n in chunks]
    fed = [seq.chunk_embeddings(n) for seq, n in chunks]  # an image request's rows
    given = {"embeddings": fed} if any(f is not None for f in fed) else {}
    cache, inputs = batch.step_inputs() if rows else (None, [])
    row_drafts = [drafts.get(i, []) for i in range(len(rows))] if drafts else None
    try:
        row_logits, first_logits = runner.ragged(
            cache, inputs, [(seq.cache, piece) for (seq, _), piece
                            in zip(chunks, pieces, strict=True)], last, row_drafts, **given)
    except Exception as exc:  # noqa: BLE001 - retried as separate passes
        log.warning("a shared pass failed (%s: %s); running the tick's passes apart",
                    type(exc).__name__, exc)
        return None
    for seq, n in chunks:
        seq.num_cached += n
        seq.past_images()
    firsts = [seq for (seq, _), done in zip(chunks, last, strict=True) if done]
    run.shared = bool(chunks)
    results = [] if first_logits is None else [sample_pass(firsts, first_logits)]
    try:
        if not rows:
            decoded = None
        elif drafts:
            decoded = checked(rows, drafts, row_logits, batch, ends)
        else:
            decoded = sample_pass(rows, row_logits)
    except Exception as exc:  # noqa: BLE001 - the rows fail, the engine goes on
        decoded = PassResult.failed(rows, exc)
    run.forward_s = time.perf_counter() - t
    if decoded is not None:
        results.append(decoded)
    run.decode_s = time.perf_counter() - plan.t0
    return results


def run_prefill(runner: ModelRunner, chunks: list[tuple[Sequence, int]], max_history: int,
                run: TickRun) -> list[PassResult]:
    """The tick's prefill chunks, in passes apart from the decode step (grouped by
    `group_prefill`). A chunk that ends its prompt includes the prompt's last token, and the
    first output token is sampled from that pass's logits (vLLM and llama.cpp do the same):
    a chat's next turn costs one forward pass, not a prefill pass and then a decode pass.
    Returns the passes' results: the first tokens of the prompts they finished, or the
    error that fails a pass's requests."""
    t = time.perf_counter()
    results = []
    for group in _embedded_alone(group_prefill(chunks, max_history=max_history)):
        pieces = [seq.prompt_tokens[seq.num_cached : seq.num_cached + n] for seq, n in group]
        last = [seq.num_cached + n == seq.num_prompt_tokens for seq, n in group]
        try:
            if len(group) == 1:
                seq, n = group[0]
                given = seq.chunk_embeddings(n)  # an image request's rows
                at = (seq.vision.positions[:, seq.num_cached : seq.num_cached + n]
                      if placed(seq) else None)  # and its M-RoPE positions
                logits = runner.prefill(seq.cache, pieces[0], logits=last[0], positions=at,
                                        blocks=seq.chunk_blocks(n),
                                        **({"embeddings": given} if given is not None else {}))
            else:
                caches, logits = runner.prefill_many(
                    [seq.cache for seq, _ in group], pieces, logits=last)
                for (seq, _), cache in zip(group, caches, strict=True):
                    seq.cache = cache
            for seq, n in group:
                seq.num_cached += n
                seq.past_images()
            firsts = [seq for (seq, _), done in zip(group, last, strict=True) if done]
            result = sample_pass(firsts, logits) if logits is not None else None
        except Exception as exc:  # noqa: BLE001 - these requests fail, the engine goes on
            result = PassResult.failed([seq for seq, _ in group], exc)
        if result is not None:
            results.append(result)
    run.prefill_s = time.perf_counter() - t
    return results


def _embedded_alone(groups: list[list[tuple[Sequence, int]]],
                    ) -> list[list[tuple[Sequence, int]]]:
    """The prefill groups with each chunk fed as embeddings (an image request's) or at
    M-RoPE positions in a pass of its own: a padded pass of several prompts takes token ids
    at their indices."""
    out = []
    for group in groups:
        alone = [c for c in group if c[0].prompt_embeddings is not None or placed(c[0])]
        if alone and len(group) > 1:
            out += [[c] for c in alone]
            rest = [c for c in group if c not in alone]
            if rest:
                out.append(rest)
        else:
            out.append(group)
    return out


def run_decode(batch: DecodeBatch, more_coming: bool, run: TickRun) -> PassResult:
    """One token per decoding row (forward pass + sampling; `DecodeBatch.step` replays the
    compiled step and runs ahead where it may)."""
    t = time.perf_counter()
    try:
        with batch.runner.shifted(batch.seqs):  # M-RoPE image rows: each its delta
            result = batch.step(more_coming)
    except Exception as exc:  # noqa: BLE001 - the tick's requests fail, the engine goes on
        result = PassResult.failed(batch.seqs, exc)
    run.forward_s = time.perf_counter() - t
    return result


def run_checked_alone(batch: DecodeBatch, drafts: list[int], ends: RowEnds,
                      run: TickRun) -> PassResult:
    """A lone row's input and drafts in one pass (any backend)."""
    t = time.perf_counter()
    seq = batch.seqs[0]
    try:
        with batch.runner.shifted(batch.seqs):
            logits = batch.verify_alone(drafts)
        result = checked([seq], {0: drafts}, logits, batch, ends)
    except Exception as exc:  # noqa: BLE001 - the row fails, the engine goes on
        result = PassResult.failed([seq], exc)
    run.forward_s = time.perf_counter() - t
    return result


def run_checked_rows(batch: DecodeBatch, drafts: dict[int, list[int]], ends: RowEnds,
                     run: TickRun) -> PassResult:
    """A batch's inputs and drafts in one pass of its own, rows padded to the most drafts
    (`DecodeBatch.verify_rows`); every computed position counts as drafted (the padding
    costs as much as a draft, and the costs learn what a position costs)."""
    t = time.perf_counter()
    seqs = list(batch.seqs)
    row_drafts = [drafts.get(i, []) for i in range(len(seqs))]
    run.drafted = len(seqs) * max(map(len, row_drafts))
    try:
        with batch.runner.shifted(batch.seqs):
            logits = batch.verify_rows(row_drafts)
        result = checked(seqs, drafts, logits, batch, ends)
    except Exception as exc:  # noqa: BLE001 - the rows fail, the engine goes on
        result = PassResult.failed(seqs, exc)
    run.forward_s = time.perf_counter() - t
    return result


def checked(seqs: list[Sequence], drafts: dict[int, list[int]], logits: mx.array,
            batch: DecodeBatch, ends: RowEnds) -> PassResult:
    """The tokens each row takes from a pass that checked drafts (`sample_drafted`: the
    same as plain decoding would draw); the KV of drafts not taken is taken back before
    anyone reads it. The result names each row's drafts (`PassResult.drafts`), so
    post-processing tells the speculation planner how they fared."""
    row_drafts = [drafts.get(i, []) for i in range(len(seqs))]
    taken, logprobs = sample_drafted(seqs, row_drafts, logits)
    taken = [ends.cut(seq, drawn) for seq, drawn in zip(seqs, taken, strict=True)]
    for row, (d, drawn) in enumerate(zip(row_drafts, taken, strict=True)):
        refused = len(d) + 1 - len(drawn) if d else 0
        if refused:
            batch.take_back(row, refused)
    return PassResult(list(seqs), [t[0] for t in taken], logprobs,
                      more=[t[1:] for t in taken], drafts=row_drafts)
