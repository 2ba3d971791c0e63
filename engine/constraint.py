"""Constrained decoding per row (issue #30): a grammar matcher per request, its token mask.

A request whose SamplingParams carry a `grammar` gets a `RowMatcher` (an llguidance
LLMatcher over the engine's one LLTokenizer, `GrammarTokenizer`). Every token it draws,
`mask_logits` sets the logits of the tokens its grammar does not allow next to -inf before
its sampler reads them (engine/next_token.py: the prompt's first token, decode rows);
`RowMatcher.consume` then takes the drawn token (EngineCore._accept). Rows without a
grammar keep their logits as they are (a select that picks their own values), so their
tokens do not change. The masks are computed on the CPU by llguidance (in Rust, without
the GIL) while the forward pass that gives the logits runs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

import mlx.core as mx
import numpy as np
from llguidance import LLExecutor, LLMatcher, LLTokenizer
from llguidance.hf import from_tokenizer
from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask_par

from .grammars import GrammarError


class GrammarTokenizer:
    """The engine's tokenizer as llguidance reads it, built once (on the first grammar: it
    costs ~0.4 s for a 49k vocabulary), and the executor that computes masks in parallel."""

    def __init__(self, tokenizer: Any, eos_token_ids: Iterable[int]) -> None:
        self._tokenizer = tokenizer  # mlx-lm's TokenizerWrapper (or a HF fast tokenizer)
        # the model's end tokens: allowed where the grammar accepts, and they end the row.
        # An engine without any (tests) uses the tokenizer's own.
        self._eos = sorted(eos_token_ids) or list(getattr(tokenizer, "eos_token_ids", []))
        self._lock = threading.Lock()
        self._ll: LLTokenizer | None = None
        self.executor: LLExecutor | None = None

    def llguidance(self) -> LLTokenizer:
        with self._lock:
            if self._ll is None:
                hf = getattr(self._tokenizer, "_tokenizer", self._tokenizer)
                try:
                    self._ll = from_tokenizer(hf, eos_token=self._eos or None)
                except Exception as exc:  # noqa: BLE001 - said as the grammar's refusal
                    raise GrammarError("grammar: this model's tokenizer cannot be used for "
                                       f"constrained output ({exc})") from None
                self.executor = LLExecutor()
            return self._ll

    def warm(self) -> None:
        """Build the LLTokenizer now, on a thread of its own (Engine.load): the first
        request with a grammar then does not wait for it. A tokenizer llguidance cannot
        read is said when such a request comes."""
        def build() -> None:
            try:
                self.llguidance()
            except GrammarError:
                pass

        threading.Thread(target=build, name="grammar-tokenizer", daemon=True).start()

    def matcher(self, grammar: str) -> RowMatcher:
        """A fresh matcher for one request; GrammarError when the grammar cannot be used
        with this tokenizer (e.g. a token id beyond its vocabulary)."""
        tok = self.llguidance()
        m = LLMatcher(tok, grammar, log_level=0)
        if m.is_error():
            raise GrammarError(f"grammar cannot be used with this model: "
                               f"{m.get_error().strip()}")
        return RowMatcher(m, tok, self)


class RowMatcher:
    """One request's grammar state: what it allows next, and the tokens it has taken."""

    __slots__ = ("matcher", "vocab", "eos", "owner", "_early")

    def __init__(self, matcher: LLMatcher, tok: LLTokenizer, owner: GrammarTokenizer) -> None:
        self.matcher = matcher
        self.vocab = tok.vocab_size
        self.eos = frozenset(tok.eos_tokens)
        self.owner = owner
        # (token, what taking it gave): a token taken early, for a step started ahead
        self._early: tuple[int, str | None] | None = None

    def consume(self, token: int) -> str | None:
        """Take the drawn token (EngineCore._accept); None, or the error that ends the row
        (the mask allowed only what the grammar allows, so an error is the matcher's own).
        A token `take_early` took is not taken twice."""
        if self._early is not None:
            (early, problem), self._early = self._early, None
            if early != token:  # never: the token delivered is the one drawn
                raise RuntimeError(f"grammar: took token {early} early, then got {token}")
            return problem
        return self._take(token)

    def take_early(self, token: int) -> None:
        """Take this step's token before it is delivered, so that the step started ahead
        is masked for the token after it (engine/decode_batch.py); `consume` reports it."""
        self._early = (token, self._take(token))

    def _take(self, token: int) -> str | None:
        if self.matcher.consume_token(token):
            return None
        why = self.matcher.get_error().strip() or f"token {token} is not allowed here"
        return f"grammar: {why}"

    @property
    def took_early(self) -> bool:
        return self._early is not None

    @property
    def stopped(self) -> bool:
        """The grammar is complete and allows nothing more (or took an end token)."""
        return self.matcher.is_stopped()


def mask_logits(matchers: Sequence[RowMatcher | None], logits: mx.array) -> mx.array:
    """`logits` (B, V) with each constrained row's disallowed tokens at -inf; rows whose
    matcher is None keep their own values (mx.where selects them unchanged). The masks are
    computed while the logits' graph runs (they do not depend on it)."""
    rows = [(i, m) for i, m in enumerate(matchers) if m is not None]
    if not rows:
        return logits
    mx.async_eval(logits)  # the forward pass runs while llguidance computes the masks
    vocab = rows[0][1].vocab
    bits = allocate_token_bitmask(len(rows), vocab)
    executor = rows[0][1].owner.executor
    fill_next_token_bitmask_par(executor, [(m.matcher, j) for j, (_, m) in enumerate(rows)],
                                bits)
    width = logits.shape[-1]
    unpacked = np.unpackbits(bits.view(np.uint8), axis=1, bitorder="little")
    allowed = np.ones((logits.shape[0], width), dtype=np.bool_)
    take = min(width, vocab)
    for j, (i, _) in enumerate(rows):
        allowed[i, :take] = unpacked[j, :take]
        allowed[i, take:] = False  # logits past the tokenizer's vocabulary: no token
    return mx.where(mx.array(allowed), logits, -mx.inf)
