"""What a grammar costs the batch (issue #30 item 4): decode throughput with and without.

    python -m bench.constrained [--model bundled] [--max-tokens 64] [--repeats 3]

On the engine in this process (step mode, no server), the same chat prompts and max_tokens
every way: 16 rows of which 8 carry a JSON schema against 16 rows without one, and one
stream with the schema against one without. The schema asks for a long array of records,
so no constrained row completes before max_tokens and every way decodes the same number
of rows for the same number of steps (the engine has no end token here: free rows run to
max_tokens too). Decode tok/s: the tokens after each row's first, over the time from the
last first token to the last token. Each trial runs every way, alternated; medians, and
the ratio constrained / free (the target: >= 0.9x). With --clock, also the time the
engine thread spends on grammars (masks, matchers taking tokens): a figure the machine's
other load moves less than the throughput's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from engine.blas import ensure_fast_blas

SCHEMA = {
    "type": "object",
    "properties": {"people": {"type": "array", "minItems": 50, "items": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                       "colour": {"enum": ["red", "green", "blue"]},
                       "pets": {"type": "array", "items": {"type": "string"}}},
        "required": ["name", "age", "colour", "pets"], "additionalProperties": False}}},
    "required": ["people"], "additionalProperties": False,
}
TOPICS = ["a village", "a ship's crew", "a school class", "a football team", "a choir",
          "a chess club", "a bakery", "an orchestra", "a film set", "a farm", "a library",
          "a hospital ward", "a startup", "a theatre troupe", "a lighthouse", "a circus"]


def chat(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"List the people of {TOPICS[i % len(TOPICS)]} as "
                                        "JSON: name, age, favourite colour and pets."}]


class MaskClock:
    """Time the engine thread spends on grammars: computing and applying a step's masks
    (timed after the step's forward pass, so without the overlap: an upper bound) and the
    matchers taking tokens; steps that masked."""

    def __init__(self) -> None:
        import mlx.core as mx

        from engine import constraint, next_token

        self.seconds, self.steps = 0.0, 0
        mask, consume = next_token.mask_logits, constraint.RowMatcher.consume

        def timed_mask(matchers, logits):
            if not any(m is not None for m in matchers):
                return logits
            mx.eval(logits)  # the forward pass first, not counted: the masks' own cost,
            t = time.perf_counter()  # as if none of it overlapped the pass (an upper bound)
            out = mask(matchers, logits)
            mx.eval(out)
            self.seconds += time.perf_counter() - t
            self.steps += 1
            return out

        def timed_consume(matcher, token):
            t = time.perf_counter()
            out = consume(matcher, token)
            self.seconds += time.perf_counter() - t
            return out

        next_token.mask_logits = timed_mask
        constraint.RowMatcher.consume = timed_consume

    def take(self) -> tuple[float, int]:
        out = self.seconds, self.steps
        self.seconds, self.steps = 0.0, 0
        return out


def run(engine, rows: int, constrained: int, max_tokens: int) -> tuple[float, int]:
    """Decode tok/s of `rows` requests, the first `constrained` with the schema."""
    from engine import SamplingParams
    from engine.grammars import json_schema_grammar

    grammar = json_schema_grammar(SCHEMA)
    streams = [engine.submit(messages=chat(i), params=SamplingParams(
        max_tokens=max_tokens, grammar=grammar if i < constrained else None))
        for i in range(rows)]
    counts = [0] * rows
    for i, s in enumerate(streams):
        s.listen(lambda e, i=i: counts.__setitem__(i, counts[i] + (e.token is not None)))
    while not all(counts):  # prefill: every row has its first token
        engine.step()
    t0, start = time.perf_counter(), sum(counts)
    while engine.has_work():
        engine.step()
    took = time.perf_counter() - t0
    reasons = {s.finish_reason for s in streams}
    assert reasons == {"length"}, f"rows ended early: {reasons}"
    return (sum(counts) - start) / took, sum(counts)


def main(args: argparse.Namespace) -> None:
    from engine import Engine, EngineConfig
    from engine.loader import load_model

    loaded = load_model(args.model)
    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=[],
                    context_length=loaded.context_length,
                    config=EngineConfig(max_concurrent=16), description=loaded.description)
    ways = {"16 rows, 8 constrained": (16, 8), "16 rows, none constrained": (16, 0),
            "1 stream, constrained": (1, 1), "1 stream, free": (1, 0)}
    for rows, held in ways.values():  # warm-up: first passes of each shape, the tokenizer
        run(engine, rows, held, 8)
    got: dict[str, list[float]] = {w: [] for w in ways}
    clock = MaskClock() if args.clock else None
    spent: dict[str, list[float]] = {w: [] for w in ways}
    for trial in range(1, args.repeats + 1):
        order = list(ways) if trial % 2 else list(reversed(ways))
        for way in order:
            if clock is not None:
                clock.take()
            t0 = time.perf_counter()
            rate, made = run(engine, *ways[way], args.max_tokens)
            took = time.perf_counter() - t0
            got[way].append(rate)
            note = ""
            if clock is not None and ways[way][1]:
                seconds, steps = clock.take()
                spent[way].append(seconds / took)
                note = (f", grammar work {1000 * seconds / max(steps, 1):.2f} ms a step, "
                        f"{100 * seconds / took:.1f}% of the run")
            print(f"trial {trial} {way:26s} decode {rate:7.1f} tok/s ({made} tokens{note})",
                  flush=True)
    med = {w: statistics.median(r) for w, r in got.items()}
    print(f"\n{loaded.description}, max_tokens {args.max_tokens}, medians of {args.repeats}:")
    for way, rate in med.items():
        share = (f"  (grammar work on the engine thread: "
                 f"{100 * statistics.median(spent[way]):.1f}% of the time)" if spent[way] else "")
        print(f"  {way:26s}: {rate:7.1f} tok/s{share}")
    print(f"  ratio 16 rows (8 constrained / none): "
          f"{med['16 rows, 8 constrained'] / med['16 rows, none constrained']:.2f}x")
    print(f"  ratio 1 stream (constrained / free):  "
          f"{med['1 stream, constrained'] / med['1 stream, free']:.2f}x")


if __name__ == "__main__":
    ensure_fast_blas()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="bundled")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--clock", action="store_true",
                   help="also time the grammar work on the engine thread (adds a sync)")
    main(p.parse_args())
    sys.stdout.flush()
    os._exit(0)  # MLX's static destructors can abort after worker-thread use (mlx#3126)
