"""llguidance against xgrammar (issue #30: "measure and pick"): what each grammar engine costs
the engine's steps, for the same JSON schemas on the model's own tokenizer.

    python -m bench.grammar_engines [--model bundled] [--steps 300] [--rows 8]

xgrammar is not a dependency of BatchChat (it needs PyTorch): run this from a virtual
environment that has it beside the project's packages, e.g.

    python -m venv /tmp/xgr && /tmp/xgr/bin/pip install torch==2.13.0 && \\
        /tmp/xgr/bin/pip install --no-deps xgrammar apache-tvm-ffi && \\
        echo "$PWD/.venv/lib/python3.11/site-packages" \\
            > /tmp/xgr/lib/python3.11/site-packages/project.pth
    /tmp/xgr/bin/python -m bench.grammar_engines

For each engine: the tokenizer's setup, a schema's compile (its first matcher, no cache),
and then, over --steps steps, the masks of --rows matchers filled in parallel into one
packed (rows, words) int32 buffer (what the engine uploads: both libraries write the same
layout) and one row's alone, and the matchers taking a token each. Both engines walk the
same path: each row's next token is the argmax of fresh random logits among the tokens both
masks allow (a row whose masks share no token, or that completes, starts again). Both are
asked for compact JSON (no free whitespace), as the engine's `json_schema_grammar` is. The
two fills alternate in order each step; medians. Also printed: on how many of the rows'
steps the two masks were the same bits.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

from bench.constrained import SCHEMA as PEOPLE
from engine.preload import ensure_preloads

# A record with bounds, an enum, a nested object, a bounded array (the server tests' schema
# too: tests/server/test_structured_bundled.py)
PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 24},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "mood": {"enum": ["happy", "sad", "calm"]},
    "address": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 24},
        "zip": {"type": "integer", "minimum": 10000, "maximum": 99999}},
        "required": ["city", "zip"], "additionalProperties": False},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 12},
             "minItems": 1, "maxItems": 3}},
    "required": ["name", "age", "mood", "address", "tags"], "additionalProperties": False}
SCHEMAS = {"people (a long array of records)": PEOPLE, "person (bounds, nested)": PERSON}


class Llguidance:
    name = "llguidance"

    def __init__(self, tokenizer, eos: list[int]) -> None:
        from llguidance.numpy import fill_next_token_bitmask_par

        from engine.constraint import GrammarTokenizer

        # the engine's own: its LLTokenizer, executor and matchers (engine/constraint.py)
        self.grammars = GrammarTokenizer(tokenizer, eos)
        t = time.perf_counter()
        self.tok = self.grammars.llguidance()
        self.setup = time.perf_counter() - t
        self._fill = fill_next_token_bitmask_par

    def compile(self, schema: dict) -> object:
        from engine.grammars import json_schema_grammar

        return json_schema_grammar(schema)  # the matcher compiles it (LLMatcher below)

    def matcher(self, grammar: object):
        return self.grammars.matcher(grammar).matcher

    def fill(self, matchers, bits: np.ndarray) -> None:
        self._fill(self.grammars.executor, [(m, i) for i, m in enumerate(matchers)], bits)

    def take(self, m, token: int) -> bool:
        return m.consume_token(token)

    def done(self, m) -> bool:
        return m.is_stopped() or m.is_accepting()

    def reset(self, m) -> None:
        m.reset()


class Xgrammar:
    name = "xgrammar"

    def __init__(self, hf, vocab: int, eos: list[int]) -> None:
        import xgrammar as xgr

        t = time.perf_counter()
        self.info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=vocab,
                                                       stop_token_ids=eos)
        self.setup = time.perf_counter() - t
        self.xgr = xgr
        self.batch = xgr.BatchGrammarMatcher()

    def compile(self, schema: dict) -> object:
        compiler = self.xgr.GrammarCompiler(self.info, cache_enabled=False)
        return compiler.compile_json_schema(json.dumps(schema), any_whitespace=False,
                                            separators=(",", ":"))

    def matcher(self, grammar: object):
        return self.xgr.GrammarMatcher(grammar)

    def fill(self, matchers, bits: np.ndarray) -> None:
        if len(matchers) == 1:
            matchers[0].fill_next_token_bitmask(bits, 0)
        else:
            self.batch.batch_fill_next_token_bitmask(matchers, bits)

    def take(self, m, token: int) -> bool:
        return m.accept_token(token)

    def done(self, m) -> bool:
        return m.is_terminated() or m.is_completed()

    def reset(self, m) -> None:
        m.reset()


# What each engine lets through inside a JSON string, its length bounded (the person schema)
# and not (NAMED): text is tokenized as the model would write it; a control probe without
# the odd part must pass
NAMED = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
         "additionalProperties": False}
PROBES = {
    "a raw control character U+0001 in a string (invalid JSON, RFC 8259)": (
        '{"name":"a\x01b"', '{"name":"ab"'),
    "a special token (<|im_start|>) in a string": ('{"name":"<|im_start|>', '{"name":"'),
    "an escaped quote in a string (valid JSON)": ('{"name":"a\\"b"', '{"name":"ab"'),
}


def probe(engine, grammar, hf, text: str, control: str) -> str:
    """Whether `engine` takes `text`'s tokens (the special token, if any, as its own id)."""
    def tokens(t: str) -> list[int]:
        special = "<|im_start|>"
        if special in t:
            return tokens(t.replace(special, "")) + [hf.convert_tokens_to_ids(special)]
        return hf.encode(t, add_special_tokens=False)

    def takes(t: str) -> bool:
        m = engine.matcher(grammar)
        return all(engine.take(m, tok) for tok in tokens(t))

    if not takes(control):
        return "n/a (its control was refused)"
    return "takes it" if takes(text) else "refuses it"


def allowed(bits_row: np.ndarray, vocab: int) -> np.ndarray:
    return np.unpackbits(bits_row.view(np.uint8), bitorder="little")[:vocab].astype(bool)


def walk(engines, grammars, rows: int, steps: int, vocab: int, words: int,
         seed: int) -> tuple[dict[str, dict[str, list[float]]], list[int]]:
    """`steps` steps of `rows` rows on every engine, the same tokens: per engine the fill's
    and the takes' seconds a step, and per step how many rows' masks were the same bits."""
    rng = np.random.default_rng(seed)
    matchers = {e.name: [e.matcher(grammars[e.name]) for _ in range(rows)] for e in engines}
    bits = {e.name: np.zeros((rows, words), dtype=np.int32) for e in engines}
    out = {e.name: {"fill": [], "take": []} for e in engines}
    same = []
    for step in range(steps):
        order = engines if step % 2 else list(reversed(engines))
        for e in order:
            bits[e.name].fill(-1)
            t = time.perf_counter()
            e.fill(matchers[e.name], bits[e.name])
            out[e.name]["fill"].append(time.perf_counter() - t)
        a, b = (bits[e.name] for e in engines)
        same.append(int((a == b).all(axis=1).sum()))
        tokens = []
        for r in range(rows):
            both = allowed(a[r], vocab) & allowed(b[r], vocab)
            logits = rng.standard_normal(vocab)
            tokens.append(int(np.where(both, logits, -np.inf).argmax()) if both.any() else -1)
        for e in engines:
            t = time.perf_counter()
            for m, tok in zip(matchers[e.name], tokens, strict=True):
                if tok >= 0:
                    assert e.take(m, tok), (e.name, tok)
            out[e.name]["take"].append(time.perf_counter() - t)
        for r, tok in enumerate(tokens):
            if tok < 0 or any(e.done(matchers[e.name][r]) for e in engines):
                for e in engines:
                    e.reset(matchers[e.name][r])
    return out, same


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="bundled")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rows", type=int, default=8)
    args = p.parse_args(argv)
    try:
        import xgrammar  # noqa: F401
    except ImportError:
        print("xgrammar is not installed here: see this module's docstring for a virtual "
              "environment that has it", file=sys.stderr)
        return 2
    from importlib.metadata import version

    from engine.loader import load_model

    loaded = load_model(args.model)
    hf = getattr(loaded.tokenizer, "_tokenizer", loaded.tokenizer)
    eos = sorted(loaded.eos_token_ids)
    ll = Llguidance(loaded.tokenizer, eos)
    vocab = ll.tok.vocab_size  # the masks' width in the engine
    words = (vocab + 31) // 32
    engines = [ll, Xgrammar(hf, vocab, eos)]
    print(f"{loaded.description}: vocabulary {vocab}; llguidance {version('llguidance')}, "
          f"xgrammar {version('xgrammar')}; {args.rows} rows and 1 row, {args.steps} steps")
    for e in engines:
        print(f"  {e.name:10s} tokenizer setup {1000 * e.setup:8.1f} ms")
    for bounds, schema in (("maxLength 24", PERSON), ("no bounds", NAMED)):
        grammars = {e.name: e.compile(schema) for e in engines}
        for label, (text, control) in PROBES.items():
            print(f"  {label}, {bounds}: " + "; ".join(
                f"{e.name} {probe(e, grammars[e.name], hf, text, control)}" for e in engines))
    for label, schema in SCHEMAS.items():
        print(f"\n{label}:")
        grammars = {}
        for e in engines:
            t = time.perf_counter()
            grammars[e.name] = e.compile(schema)
            e.matcher(grammars[e.name])
            took = time.perf_counter() - t
            print(f"  {e.name:10s} compile + first matcher {1000 * took:8.2f} ms")
        for rows in (args.rows, 1):
            got, same = walk(engines, grammars, rows, args.steps + 10, vocab, words, seed=rows)
            same = same[10:]  # the first steps: warm-up
            med = {e.name: {k: statistics.median(v[10:]) for k, v in got[e.name].items()}
                   for e in engines}
            for e in engines:
                print(f"  {rows:2d} row(s) {e.name:10s} mask {1000 * med[e.name]['fill']:7.3f} "
                      f"ms a step, tokens taken {1000 * med[e.name]['take']:6.3f} ms")
            ratio = med["xgrammar"]["fill"] / med["llguidance"]["fill"]
            print(f"  {rows:2d} row(s) xgrammar / llguidance mask time: {ratio:.2f}x; "
                  f"masks the same bits on "
                  f"{100 * sum(same) / (rows * len(same)):.1f}% of the rows' steps")
    return 0


if __name__ == "__main__":
    ensure_preloads()
    sys.exit(main())
