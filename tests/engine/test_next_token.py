"""engine.next_token: one sampling rule, whether a sequence's last token is in its output
or still pending (the step started ahead samples before it is read back)."""

from __future__ import annotations

import mlx.core as mx

from engine import SamplingParams
from engine.next_token import PassResult, sample_next, sample_pass
from engine.sampling import RowSampler
from engine.sequence import Priority, Sequence

VOCAB = 64


def seq(params: SamplingParams, output: list[int], seed: int) -> Sequence:
    return Sequence(request_id=f"r{seed}", prompt_tokens=list(range(10, 30)), params=params,
                    priority=Priority.INTERACTIVE, text=None, seed=seed,
                    sampler=RowSampler(params, seed), output_tokens=list(output))


def test_a_pending_token_counts_as_if_it_were_in_the_output() -> None:
    """The penalty history and the draw's step count the pending token: the same tokens
    as sampling once it was appended."""
    params = [SamplingParams(repetition_penalty=1.3),  # greedy, penalised
              SamplingParams(temperature=0.8, top_p=0.9, repetition_penalty=1.2,
                             repetition_context_size=4),
              SamplingParams(temperature=0.7),
              SamplingParams()]
    last = [40, 41, 42, 43]
    logits = mx.random.normal((4, VOCAB), key=mx.random.key(3))
    for i, t in enumerate(last):  # each row's last token is its favourite, narrowly
        logits[i, t] = 4.0
        logits[i, 50 + i] = 3.9
    before = [seq(p, [3, 5], seed) for seed, p in enumerate(params)]
    after = [seq(p, [3, 5, t], seed) for seed, (p, t) in enumerate(zip(params, last,
                                                                       strict=True))]
    ahead, none = sample_next(before, logits, pending=mx.array(last))
    want, _ = sample_next(after, logits)
    assert none is None and ahead.tolist() == want.tolist()
    assert want[0].item() == 50  # the penalty read the pending token
    assert sample_pass(after, logits).tokens == want.tolist()


def test_a_pass_result_reads_its_tokens_back_or_carries_its_error() -> None:
    rows = [seq(SamplingParams(logprobs=2), [], 1), seq(SamplingParams(), [], 2)]
    logits = mx.random.normal((2, VOCAB), key=mx.random.key(4))
    result = sample_pass(rows, logits)
    assert result.seqs == rows and result.tokens == mx.argmax(logits, axis=-1).tolist()
    assert result.logprobs[0] is not None and len(result.logprobs[0].top) == 2
    assert result.logprobs[1] is None and result.error is None
    failed = PassResult.failed(rows, MemoryError("no room"))
    assert failed.tokens == [] and isinstance(failed.error, MemoryError)
