"""Constrained decoding per row (issue #30): a grammar matcher per request, its token mask.

A request whose SamplingParams carry a `grammar` gets a `RowMatcher` (an llguidance
LLMatcher over the engine's one LLTokenizer, `GrammarTokenizer`). Every token it draws,
`mask_logits` sets the logits of the tokens its grammar does not allow next to -inf before
its sampler reads them (engine/next_token.py: the prompt's first token, decode rows);
`RowMatcher.consume` then takes the drawn token (EngineCore._accept). Rows without a
grammar keep their logits as they are (a select that picks their own values), so their
tokens do not change. The masks are computed on the CPU by llguidance (in Rust, without
the GIL) while the forward pass that gives the logits runs, into one reused buffer of
llguidance's packed words (32 tokens a word); those go to the device as they are and one
compiled kernel expands the bits and selects (before: a (rows, vocab) bool mask unpacked
with numpy and uploaded, then an `mx.where`; docs/performance.md, "What a grammar costs the
batch").
"""

from __future__ import annotations

import copy
import functools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import mlx.core as mx
import numpy as np
from llguidance import LLExecutor, LLMatcher, LLTokenizer
from llguidance.numpy import (
    fill_next_token_bitmask_par,
    fill_next_token_bitmask_par_with_draft_tokens,
)
from transformers import PreTrainedTokenizerFast

from .grammars import GrammarError

# LLTokenizers built (~0.8 CPU-s each for the bundled model's vocabulary), reused by every
# Engine on the same vocabulary: the tests' engines on one shared model, a model loaded
# again (a switch back to it, a fleet's reload). Two levels:
# - per live HF tokenizer object {id(hf): (weakref to hf, {eos: built})}: the same object
#   cannot give another vocabulary; held weakly, so a dropped model is not kept alive.
# - per serialized tokenizer (llguidance's own input, the whole tokenizer.json as text,
#   compared in full: two vocabularies that differ never match), the last few: another
#   object of the same model skips the build (~0.3 CPU-s of serializing left).
_built: dict[int, tuple[weakref.ref[Any], dict[Any, LLTokenizer]]] = {}
_by_text: OrderedDict[tuple[str, Any], LLTokenizer] = OrderedDict()
_BY_TEXT_KEPT = 3  # models a process switches between; each holds its vocabulary's tables
# one build at a time: two engines warming on the same tokenizer build it once. An RLock:
# a weakref callback may run (a gc) while it is held
_built_lock = threading.RLock()


# Entries whose tokenizer died while the lock was held elsewhere: dropped at the next build.
_dead: list[tuple[int, weakref.ref[Any]]] = []


def _forget(key: int, ref: weakref.ref[Any]) -> None:
    # A weakref callback runs wherever a gc does, also in the exit's last collection, after
    # the daemon thread of `GrammarTokenizer.warm` was stopped holding the lock mid-build:
    # waiting for it there hung the process for ever. So it never waits.
    if not _built_lock.acquire(blocking=False):
        _dead.append((key, ref))
        return
    try:
        _drop(key, ref)
    finally:
        _built_lock.release()


def _drop(key: int, ref: weakref.ref[Any]) -> None:
    entry = _built.get(key)
    if entry is not None and entry[0] is ref:
        del _built[key]


def _serialized(hf: Any) -> str:
    """The tokenizer as llguidance.hf.from_tokenizer gives it to LLTokenizer: its Rust
    tokenizer as JSON (added tokens included), without padding or truncation."""
    if not isinstance(hf, PreTrainedTokenizerFast):
        raise ValueError("Only fast tokenizers are supported")
    backend = hf.backend_tokenizer
    if backend.padding is None and backend.truncation is None:
        return backend.to_str()  # as it is: the copy (a JSON round trip) would change nothing
    backend = copy.copy(backend)
    backend.no_padding()
    backend.no_truncation()
    return backend.to_str()


def shared_llguidance_tokenizer(hf: Any, eos: Sequence[int]) -> LLTokenizer:
    """llguidance's LLTokenizer for this HF tokenizer and these end tokens (none: the
    tokenizer's own), as from_tokenizer(hf, eos_token=...) builds it, built once per
    process for a vocabulary (GrammarError when llguidance cannot read it)."""
    key, ends = id(hf), tuple(eos)
    with _built_lock:
        while _dead:
            _drop(*_dead.pop())
        entry = _built.get(key)
        if entry is not None and entry[0]() is hf and ends in entry[1]:
            return entry[1][ends]
        try:
            eos_token = list(ends) or hf.eos_token_id
            text_key = (_serialized(hf), eos_token if isinstance(eos_token, int | None)
                        else tuple(eos_token))
            built = _by_text.get(text_key)
            if built is None:
                built = LLTokenizer(text_key[0], n_vocab=None, eos_token=eos_token)
                _by_text[text_key] = built
                while len(_by_text) > _BY_TEXT_KEPT:
                    _by_text.popitem(last=False)
            _by_text.move_to_end(text_key)
        except Exception as exc:  # noqa: BLE001 - said as the grammar's refusal
            raise GrammarError("grammar: this model's tokenizer cannot be used for "
                               f"constrained output ({exc})") from None
        if entry is None or entry[0]() is not hf:
            try:
                ref = weakref.ref(hf, lambda r, key=key: _forget(key, r))
            except TypeError:  # an object without weak references: by its text only
                return built
            entry = _built[key] = (ref, {})
        entry[1][ends] = built
        return built


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
        # the packed masks of a step (rows, words), reused: llguidance writes into it
        self._bits = np.empty((0, 0), dtype=np.int32)
        self._bits_lock = threading.Lock()

    def llguidance(self) -> LLTokenizer:
        with self._lock:
            if self._ll is None:
                hf = getattr(self._tokenizer, "_tokenizer", self._tokenizer)
                self._ll = shared_llguidance_tokenizer(hf, self._eos)
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

    def packed_masks(self, matchers: Sequence[RowMatcher | None],
                     drafts: Mapping[int, list[int]] | None = None) -> mx.array:
        """(rows, words) int32, as llguidance packs a mask (bit j of word w: token 32 w + j
        allowed; bits past the vocabulary 0) for each row with a matcher, all ones for a row
        without. `drafts` {i: tokens}: row i's matcher also gives rows i+1 .. i+len(tokens)
        the masks that follow each of those tokens in turn (a row checking drafts,
        engine/grammar_planner.py; llguidance takes them and rolls them back). llguidance
        fills one buffer kept for the next step (no allocation a step); the mx.array made
        of it is its copy."""
        vocab = next(m.vocab for m in matchers if m is not None)
        words = (vocab + 31) // 32
        drafts = {i: d for i, d in (drafts or {}).items() if d}
        after = {i + j for i, d in drafts.items() for j in range(1, len(d) + 1)}
        rows = [(m.matcher, i) for i, m in enumerate(matchers)
                if m is not None and i not in after]
        with self._bits_lock:
            if self._bits.shape[0] < len(matchers) or self._bits.shape[1] != words:
                self._bits = np.empty((max(len(matchers), 16), words), dtype=np.int32)
            bits = self._bits[: len(matchers)]
            bits.fill(-1)
            plain = [(m, i) for m, i in rows if i not in drafts]
            if plain:
                fill_next_token_bitmask_par(self.executor, plain, bits)
            if drafts:  # (llguidance takes no empty drafts: those rows are `plain`); on
                # copies, so the rows' own matchers are never rolled back
                fill_next_token_bitmask_par_with_draft_tokens(
                    self.executor, [(m.deep_copy(), i, drafts[i]) for m, i in rows
                                    if i in drafts], bits)
            if vocab % 32:  # the last word's bits past the vocabulary: no token (as
                # llguidance leaves them; said here so the mask does not rest on it)
                bits[[i for i, m in enumerate(matchers) if m is not None], -1] &= \
                    (1 << vocab % 32) - 1
            return mx.array(bits)


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

    def forced(self) -> list[int]:
        """The tokens the grammar forces next, in its tokenizer's canonical form (llguidance's
        fast-forward tokens; [] when the next token is free). The model may still spell
        those bytes in other tokens the grammar allows: they are drafts, not outputs."""
        return self.matcher.compute_ff_tokens()

    def can_check(self, tokens: list[int]) -> bool:
        """Whether `tokens` can be checked as drafts from here: the grammar takes them and
        gives them back (llguidance rolls back no max_tokens= or stop= lexeme, as in a
        thinking budget's grammar). Tried on a copy (a copy costs under a microsecond)."""
        probe = self.matcher.deep_copy()
        return (probe.consume_tokens(tokens) and probe.rollback(len(tokens))
                and not probe.is_error())

    @property
    def took_early(self) -> bool:
        return self._early is not None

    @property
    def stopped(self) -> bool:
        """The grammar is complete and allows nothing more (or took an end token)."""
        return self.matcher.is_stopped()


def _select(words: mx.array, shifts: mx.array, logits: mx.array) -> mx.array:
    """`logits` (rows, words, 32) where the bit of `words` (rows, words, 1) is set, else -inf."""
    return mx.where(mx.bitwise_and(mx.right_shift(words, shifts), 1) != 0, logits, -mx.inf)


# One kernel: the bits expanded and the select fused (as separate ops: four passes over
# the logits and a (rows, vocab) mask in memory). Shapeless: one trace for any batch size.
_select_c = mx.compile(_select, shapeless=True)


@functools.cache
def _shifts() -> mx.array:
    return mx.arange(32, dtype=mx.int32)


def mask_logits(matchers: Sequence[RowMatcher | None], logits: mx.array,
                drafts: Mapping[int, list[int]] | None = None) -> mx.array:
    """`logits` (B, V) with each constrained row's disallowed tokens at -inf and its allowed
    ones as they were; rows whose matcher is None keep their own values bit for bit (all
    their bits are set). `drafts` {i: tokens}: rows i+1 .. i+len(tokens) are the positions
    after each of those tokens, masked as the grammar stands after it (`packed_masks`).
    The masks are computed while the logits' graph runs (they do not depend on it);
    nothing here waits for the device."""
    if all(m is None for m in matchers):
        return logits
    mx.async_eval(logits)  # the forward pass runs while llguidance computes the masks
    words = next(m for m in matchers if m is not None).owner.packed_masks(matchers, drafts)
    rows, width = logits.shape
    need = -(-width // 32)
    if need < words.shape[1]:  # logits narrower than the tokenizer's vocabulary
        words = words[:, :need]
    elif need > words.shape[1]:  # wider: no token there (a free row's bits: set)
        free = mx.array([m is None for m in matchers])[:, None]
        pad = mx.where(free, -1, mx.zeros((rows, need - words.shape[1]), dtype=mx.int32))
        words = mx.concatenate([words, pad], axis=1)
    if width != 32 * need:  # a partial last word: padded, then cut off
        logits = mx.concatenate([logits, mx.zeros((rows, 32 * need - width), logits.dtype)],
                                axis=1)
    out = _select_c(words[:, :, None], _shifts(), logits.reshape(rows, need, 32))
    out = out.reshape(rows, 32 * need)
    return out if width == 32 * need else out[:, :width]
