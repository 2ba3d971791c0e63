"""What a grammar costs the batch (issue #30 item 4): decode throughput with and without.

    python -m bench.constrained [--model bundled] [--max-tokens 64] [--repeats 3]
                                [--sampling tabs|greedy]
    python -m bench.constrained --micro [--steps 400]   # the mask path alone
    python -m bench.constrained --clock --mask ab   # + the constrained ways on the old mask path
    python -m bench.constrained --grammar-drafts    # as the engine runs by default

On the engine in this process (step mode, no server), the same chat prompts, max_tokens and
sampling every way (by default the chat tabs' sampling, what users run, each request with
its own seed; --sampling greedy for greedy decoding): 16 rows of which 8 carry a JSON schema
against 16 rows without one, and one stream with the schema against one without. The schema
asks for a long array of records, so no constrained row completes before max_tokens and
every way decodes the same number of rows for the same number of steps (the engine has no
end token here: free rows run to max_tokens too). Decode tok/s: the tokens after each row's
first, over the time from the last first token to the last token. Each trial runs every way,
alternated; medians, and the ratio constrained / free (the target: >= 0.9x), of the medians
and the median of each trial's back-to-back pair. With --clock, also the time the engine
thread spends on grammars (masks, matchers taking tokens): a figure the machine's other load
moves less than the throughput's. On the CPU the clock evaluates the forward pass before the
masks and the masked logits after (the masks' own cost, an upper bound); on a GPU it adds no
evaluation, since waiting there would undo the step started ahead (a 2026-11-26 H100 run
with those waits read 0.64x for 16 rows: docs/performance.md), so it times only the engine
thread's own work.

--micro: the mask path alone, the engine's `mask_logits` against the one it replaced
(`mask_before`: a numpy-unpacked (rows, vocab) bool mask and an `mx.where` over the batch)
on the same 16 x vocab float32 logits with 8 rows constrained (every other row), then on
one constrained row, the matchers in the same states: each step both run, in alternating
order, their outputs must be equal bit for bit, then each matcher takes its row's argmax.
Median ms a step: the engine thread's own time until the masked logits are built (what a
GPU waits on) and until they are computed too (on the CPU the device is the same cores).
--mask ab: the engine runs the constrained ways with each path, alternated in each trial.
--batch-ahead: on the CPU, batches start their next step before this one's tokens are read,
as a GPU's do (DecodeBatch.batch_run_ahead), to see whether grammar rows keep it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from bench.request_sampling import SAMPLING, request_sampling
from engine.preload import ensure_preloads

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
    (on the CPU timed after the step's forward pass, without the overlap: an upper bound) and the
    matchers taking tokens; steps that masked; and of it, the time until the masked logits'
    graph was built (the engine thread's own part: what a GPU would wait on). On a GPU it
    adds no evaluation (self.sync), so the masks' time there is the engine thread's alone."""

    def __init__(self) -> None:
        import mlx.core as mx

        from engine import constraint, next_token

        self.seconds, self.steps, self.built, self.cpu = 0.0, 0, 0.0, 0.0
        # the mask path timed (set_mask_path: the engine's or the one before)
        self.inner, take = next_token.mask_logits, constraint.RowMatcher._take
        # On a GPU an evaluation here would wait for the step started ahead (see above)
        self.sync = mx.default_device() == mx.cpu

        def timed_mask(matchers, logits, drafts=None):
            if not any(m is not None for m in matchers):
                return logits
            if self.sync:
                mx.eval(logits)  # the forward pass first, not counted: the masks' own
            t = time.perf_counter()  # cost, as if none of it overlapped the pass
            c = time.thread_time()
            out = self.inner(matchers, logits, drafts)
            self.cpu += time.thread_time() - c  # this thread's CPU: the machine's load
            self.built += time.perf_counter() - t  # does not add waits for a core to it
            if self.sync:
                mx.eval(out)
            self.seconds += time.perf_counter() - t
            self.steps += 1
            return out

        def timed_take(matcher, token):  # a token taken, early (run-ahead) or delivered
            t = time.perf_counter()
            out = take(matcher, token)
            self.seconds += time.perf_counter() - t
            return out

        next_token.mask_logits = timed_mask
        constraint.RowMatcher._take = timed_take

    def take(self) -> tuple[float, int, float, float]:
        out = self.seconds, self.steps, self.built, self.cpu
        self.seconds, self.steps, self.built, self.cpu = 0.0, 0, 0.0, 0.0
        return out


def mask_before(matchers, logits, drafts=None):
    """The mask path before the packed masks (engine/constraint.py until 2026-11-26); it
    has no drafts (the engine here runs without grammar drafts)."""
    assert not drafts, "the mask path before takes no grammar drafts"
    import mlx.core as mx
    import numpy as np
    from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask_par

    rows = [(i, m) for i, m in enumerate(matchers) if m is not None]
    if not rows:
        return logits
    mx.async_eval(logits)
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
        allowed[i, take:] = False
    return mx.where(mx.array(allowed), logits, -mx.inf)


def micro(args: argparse.Namespace) -> None:
    import mlx.core as mx
    import numpy as np

    from engine.constraint import GrammarTokenizer, mask_logits
    from engine.grammars import json_schema_grammar
    from engine.loader import load_model

    loaded = load_model(args.model)
    tok = GrammarTokenizer(loaded.tokenizer, [])
    grammar = json_schema_grammar(SCHEMA)
    ways = {"before (unpack + where)": mask_before, "now (packed, one kernel)": mask_logits}
    for rows, every in ((16, 2), (1, 1)):  # 8 of 16 rows constrained; one stream
        matchers = [tok.matcher(grammar) if i % every == 0 else None for i in range(rows)]
        width = next(m for m in matchers if m is not None).vocab
        host: dict[str, list[float]] = {w: [] for w in ways}
        total: dict[str, list[float]] = {w: [] for w in ways}
        for step in range(args.steps + 10):
            logits = mx.random.normal((rows, width), key=mx.random.key(step))
            mx.eval(logits)
            outs = {}
            for way in (list(ways) if step % 2 else list(reversed(ways))):
                t0 = time.perf_counter()
                out = ways[way](matchers, logits)
                t1 = time.perf_counter()
                mx.eval(out)
                t2 = time.perf_counter()
                if step >= 10:  # the first steps: compiles, caches
                    host[way].append(t1 - t0)
                    total[way].append(t2 - t0)
                outs[way] = np.array(out).view(np.uint32)
            first, *rest = outs.values()
            assert all(np.array_equal(first, o) for o in rest), f"step {step}: masks differ"
            for i, m in enumerate(matchers):
                if m is not None:
                    if m.stopped:
                        m.matcher.reset()
                    assert m.consume(int(first[i].view(np.float32).argmax())) is None
        held = sum(m is not None for m in matchers)
        print(f"{rows} x {width} float32 logits, {held} constrained, {args.steps} steps, "
              f"median ms a step (outputs equal bit for bit every step):")
        for way in ways:
            print(f"  {way:26s} built {1000 * statistics.median(host[way]):.3f}  "
                  f"computed {1000 * statistics.median(total[way]):.3f}", flush=True)


def set_mask_path(name: str, clock: MaskClock | None) -> None:
    """The engine masks with its own path ("now") or the one before ("before")."""
    from engine import constraint, next_token

    path = constraint.mask_logits if name == "now" else mask_before
    if clock is not None:
        clock.inner = path
    else:
        next_token.mask_logits = path


class AheadCount:
    """How many of the batch's decode steps used a step started the tick before (run-ahead,
    a GPU's and a lone row's): where a way loses it, its steps wait for the device."""

    def __init__(self, engine) -> None:
        batch = engine._core.batch
        self.steps = self.started = 0
        plain = batch.step

        def step(more_coming: bool):
            self.steps += 1
            self.started += batch.ahead is not None and batch._started_for(list(batch.seqs))
            return plain(more_coming)

        batch.step = step

    def take(self) -> str:
        out = f"{self.started}/{self.steps} steps started ahead"
        self.steps = self.started = 0
        return out


def run(engine, rows: int, constrained: int, max_tokens: int,
        sampling: str) -> tuple[float, int]:
    """Decode tok/s of `rows` requests, the first `constrained` with the schema, each with
    `sampling` (bench/request_sampling.py) and its own seed."""
    from dataclasses import replace

    from engine.grammars import json_schema_grammar

    grammar = json_schema_grammar(SCHEMA)
    chain = request_sampling(sampling)
    streams = [engine.submit(messages=chat(i), params=replace(
        chain.params(max_tokens, seed=i), grammar=grammar if i < constrained else None))
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
    if args.micro:
        micro(args)
        return
    from engine import Engine, EngineConfig
    from engine.loader import load_model

    loaded = load_model(args.model)
    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=[],
                    context_length=loaded.context_length,
                    config=EngineConfig(max_concurrent=16, grammar_drafts=args.grammar_drafts),
                    description=loaded.description)
    # each way: rows, of them constrained, the mask path ("ab": both paths, alternated)
    paths = ["now", "before"] if args.mask == "ab" else [args.mask]
    ways = {"16 rows, 8 constrained" + ("" if p == "now" else f", {p}"): (16, 8, p)
            for p in paths}
    ways["16 rows, none constrained"] = (16, 0, "now")
    ways.update({"1 stream, constrained" + ("" if p == "now" else f", {p}"): (1, 1, p)
                 for p in paths})
    ways["1 stream, free"] = (1, 0, "now")
    if args.batch_ahead:  # a GPU's batch schedule on the CPU (engine/decode_batch.py)
        engine._core.batch.batch_run_ahead = True
    clock = MaskClock() if args.clock else None
    ahead = AheadCount(engine)
    for rows, held, path in ways.values():  # warm-up: first passes of each shape, the tokenizer
        set_mask_path(path, clock)
        run(engine, rows, held, 8, args.sampling)
    got: dict[str, list[float]] = {w: [] for w in ways}
    spent: dict[str, list[float]] = {w: [] for w in ways}
    per_step: dict[str, list[float]] = {w: [] for w in ways}
    built_step: dict[str, list[float]] = {w: [] for w in ways}
    cpu_step: dict[str, list[float]] = {w: [] for w in ways}
    for trial in range(1, args.repeats + 1):
        order = list(ways) if trial % 2 else list(reversed(ways))
        for way in order:
            if clock is not None:
                clock.take()
            ahead.take()
            t0 = time.perf_counter()
            rows, held, path = ways[way]
            set_mask_path(path, clock)
            rate, made = run(engine, rows, held, args.max_tokens, args.sampling)
            took = time.perf_counter() - t0
            got[way].append(rate)
            note = ""
            if clock is not None and ways[way][1]:
                seconds, steps, built, cpu = clock.take()
                spent[way].append(seconds / took)
                per_step[way].append(seconds / max(steps, 1))
                built_step[way].append(built / max(steps, 1))
                cpu_step[way].append(cpu / max(steps, 1))
                note = (f", grammar work {1000 * seconds / max(steps, 1):.2f} ms a step "
                        f"(masks built {1000 * built / max(steps, 1):.2f}, the engine "
                        f"thread's CPU {1000 * cpu / max(steps, 1):.3f}), "
                        f"{100 * seconds / took:.1f}% of the run")
            print(f"trial {trial} {way:32s} decode {rate:7.1f} tok/s ({made} tokens, "
                  f"{ahead.take()}{note})", flush=True)
    med = {w: statistics.median(r) for w, r in got.items()}
    print(f"\n{loaded.description}, max_tokens {args.max_tokens}, sampling {args.sampling} "
          f"({request_sampling(args.sampling).fields}), medians of {args.repeats}, mask path: "
          f"{args.mask}:")
    for way, rate in med.items():
        share = (f"  (grammar work on the engine thread: "
                 f"{1000 * statistics.median(per_step[way]):.2f} ms a step, masks built "
                 f"{1000 * statistics.median(built_step[way]):.2f} (CPU "
                 f"{1000 * statistics.median(cpu_step[way]):.3f}), "
                 f"{100 * statistics.median(spent[way]):.1f}% of the time)"
                 if spent[way] else "")
        print(f"  {way:32s}: {rate:7.1f} tok/s{share}")
    pairs = [(f"16 rows (8 constrained{', ' + p if p != 'now' else ''} / none)",
              "16 rows, 8 constrained" + ("" if p == "now" else f", {p}"),
              "16 rows, none constrained") for p in paths]
    pairs += [(f"1 stream (constrained{', ' + p if p != 'now' else ''} / free)",
               "1 stream, constrained" + ("" if p == "now" else f", {p}"), "1 stream, free")
              for p in paths]
    for label, held, free in pairs:
        # each trial's pair ran back to back: their ratio drifts less with the machine's load
        paired = statistics.median(h / f for h, f in zip(got[held], got[free], strict=True))
        print(f"  ratio {label}: {med[held] / med[free]:.2f}x of the medians, "
              f"{paired:.2f}x the median of the trials' ratios")


if __name__ == "__main__":
    ensure_preloads()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="bundled")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sampling", choices=sorted(SAMPLING), default="tabs",
                   help="every request's sampling: the chat tabs' (what users run) or greedy")
    p.add_argument("--clock", action="store_true",
                   help="also time the grammar work on the engine thread (on the CPU: adds a sync)")
    p.add_argument("--batch-ahead", action="store_true",
                   help="batches run ahead as on a GPU (on the CPU only lone rows do)")
    p.add_argument("--micro", action="store_true",
                   help="the mask path alone, against the one before (see above)")
    p.add_argument("--steps", type=int, default=400, help="--micro's steps")
    p.add_argument("--mask", choices=["now", "before", "ab"], default="now",
                   help="the engine's mask path, the one before (mask_before), or both: "
                        "the constrained ways run with each, alternated in each trial")
    p.add_argument("--grammar-drafts", action="store_true",
                   help="the engine's default: a grammar's forced tokens checked as drafts "
                        "(off by default here, one mask a row a step, so that the mask "
                        "paths compare alike; not with --mask before/ab)")
    parsed = p.parse_args()
    if parsed.grammar_drafts and parsed.mask != "now":
        p.error("--grammar-drafts runs the engine's mask path only (the one before has no "
                "drafts): leave out --mask")
    main(parsed)
    sys.stdout.flush()
    os._exit(0)  # MLX's static destructors can abort after worker-thread use (mlx#3126)
