"""llguidance's view of a tokenizer is built once per tokenizer object (issue #47 item 5).

Building an LLTokenizer costs ~0.8 CPU-s for the bundled model's vocabulary; each Engine
made on the same tokenizer (a model switched back to while still loaded, the tests' engines
on one shared model, the same model loaded again) used to pay it again. engine/constraint.py
keeps one per live tokenizer object and end tokens, weakly (a dropped tokenizer is freed),
and the last few per serialized tokenizer (another object of the same vocabulary). The masks
a shared one gives are the masks llguidance's own from_tokenizer gives."""

from __future__ import annotations

import gc
import weakref

import numpy as np

from engine.constraint import GrammarTokenizer
from engine.grammars import json_schema_grammar, regex_grammar
from tests.tiny_model import make_tokenizer

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def masks_along(grammars: GrammarTokenizer, grammar: str, text: bytes) -> list[bytes]:
    """The mask before each token of `text` (one token a byte here) and after the last."""
    row = grammars.matcher(grammar)
    out = [bytes(row.matcher.compute_bitmask())]
    for token in grammars._tokenizer.encode(text.decode(), add_special_tokens=False):
        assert row.consume(token) is None
        out.append(bytes(row.matcher.compute_bitmask()))
    return out


def test_engines_on_one_tokenizer_share_its_llguidance_tokenizer() -> None:
    tokenizer = make_tokenizer()
    eos = tokenizer.eos_token_ids
    first, second = GrammarTokenizer(tokenizer, eos), GrammarTokenizer(tokenizer, eos)
    assert first.llguidance() is second.llguidance()
    # other end tokens: another LLTokenizer, whose ends are those
    only_one = GrammarTokenizer(tokenizer, [min(eos)])
    assert only_one.llguidance() is not first.llguidance()
    assert list(only_one.llguidance().eos_tokens) == [min(eos)]
    # another tokenizer object of the same vocabulary (the model loaded again): the same
    assert GrammarTokenizer(make_tokenizer(), eos).llguidance() is first.llguidance()
    # one more token: another vocabulary, its own
    grown = make_tokenizer()
    grown._tokenizer.add_tokens(["<extra>"])
    other = GrammarTokenizer(grown, eos).llguidance()
    assert other is not first.llguidance()
    assert other.vocab_size == first.llguidance().vocab_size + 1


def test_a_shared_llguidance_tokenizer_gives_the_masks_from_tokenizer_gives() -> None:
    from llguidance.hf import from_tokenizer

    tokenizer = make_tokenizer()
    eos = tokenizer.eos_token_ids
    GrammarTokenizer(make_tokenizer(), eos).llguidance()  # the vocabulary's, built before
    again = GrammarTokenizer(tokenizer, eos)
    fresh = GrammarTokenizer(tokenizer, eos)
    fresh._ll = from_tokenizer(tokenizer._tokenizer, eos_token=sorted(eos))
    assert fresh._ll is not again.llguidance()
    fresh.executor = again.executor
    assert (list(fresh._ll.eos_tokens), fresh._ll.vocab_size) == \
        (list(again.llguidance().eos_tokens), again.llguidance().vocab_size)
    for grammar, text in ((json_schema_grammar(SCHEMA), b'{"n":42}'),
                          (regex_grammar(r"[a-c]{2,4}x"), b"abcx")):
        want = masks_along(fresh, grammar, text)
        assert masks_along(again, grammar, text) == want
        assert any(np.frombuffer(m, dtype=np.uint32).any() for m in want)


def test_a_dropped_tokenizer_is_not_kept_alive() -> None:
    tokenizer = make_tokenizer()
    grammars = GrammarTokenizer(tokenizer, tokenizer.eos_token_ids)
    grammars.llguidance()
    gone = weakref.ref(tokenizer._tokenizer)  # the HF tokenizer the cache is keyed by
    del tokenizer, grammars
    gc.collect()
    assert gone() is None


def test_a_tokenizer_dropped_while_a_build_holds_the_lock_does_not_wait_for_it() -> None:
    """The drop's callback runs wherever a gc does, also in the exit's last collection after
    `GrammarTokenizer.warm`'s daemon thread was stopped mid-build, holding the lock: a script
    that loaded models and returned hung there for ever. It never waits; its entry goes at
    the next build."""
    import threading

    from engine import constraint

    tokenizer = make_tokenizer()
    GrammarTokenizer(tokenizer, tokenizer.eos_token_ids).llguidance()
    key = id(tokenizer._tokenizer)
    assert key in constraint._built
    box = [tokenizer]  # its only holder, emptied on another thread
    del tokenizer
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # a build in progress elsewhere
        with constraint._built_lock:
            held.set()
            release.wait()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    held.wait()
    try:
        dropper = threading.Thread(target=lambda: (box.clear(), gc.collect()), daemon=True)
        dropper.start()
        dropper.join(timeout=10)
        assert not dropper.is_alive()  # the callback did not wait for the lock
    finally:
        release.set()
        holder.join()
    other = make_tokenizer()
    GrammarTokenizer(other, other.eos_token_ids).llguidance()  # the next build drops it
    assert key not in constraint._built or constraint._built[key][0]() is not None
